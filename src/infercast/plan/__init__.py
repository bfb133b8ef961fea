"""Capacity planning: SLOs and traffic in, the cheapest deployment out, verified by the simulator.

``plan(model, gpus, slo=..., rate=..., input_len=..., output_len=...)`` -> :class:`PlanResult`.
Imports only the layers below it (specs, cost, analysis, sim).
"""

from infercast.plan.candidates import Candidate, CandidateSpace
from infercast.plan.planner import plan
from infercast.plan.result import PlanResult
from infercast.plan.slo import SLOSet, SLOTerm
from infercast.plan.traffic import Traffic

__all__ = ["Candidate", "CandidateSpace", "PlanResult", "SLOSet", "SLOTerm", "Traffic", "plan"]
