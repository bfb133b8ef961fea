"""Capacity planning: SLOs and traffic in, the cheapest deployment out, verified by the simulator.

``infercast.plan(model, gpus, slo=..., rate=..., input_len=..., output_len=...)`` -> :class:`PlanResult`, or
``infercast.plan(PlanRequest(...))`` with the typed parts (:mod:`~infercast.plan.request`).
The package itself is callable (it is :func:`~infercast.plan.planner.plan`), so ``infercast.plan(...)`` works
whether or not ``infercast.plan`` has been imported as a package. Imports only the layers below it (specs,
cost, analysis, sim).
"""

import sys
import types
from typing import Any

from infercast.plan.candidates import Candidate, CandidateSpace
from infercast.plan.planner import plan, run_plan
from infercast.plan.request import DailyLoad, Execution, PlanRequest, plan_request
from infercast.plan.result import PlanResult
from infercast.plan.slo import SLOSet, SLOTerm
from infercast.plan.traffic import Traffic

__all__ = [
    "Candidate",
    "CandidateSpace",
    "DailyLoad",
    "Execution",
    "PlanRequest",
    "PlanResult",
    "SLOSet",
    "SLOTerm",
    "Traffic",
    "plan",
    "plan_request",
    "run_plan",
]


class _CallablePackage(types.ModuleType):
    """``infercast.plan(...)`` calls :func:`plan`; attributes are the package's."""

    def __call__(self, *args: Any, **kwargs: Any) -> PlanResult:
        return plan(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
