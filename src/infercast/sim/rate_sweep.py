"""Latency against offered load, and the saturation point: the highest rate that still meets the SLOs.

Each rate replays the same request lengths (from the given lengths or trace) with fresh arrivals at that
rate. Without explicit rates the sweep brackets the replica's capacity, estimated from an offline run (all
requests at once: the throughput the configuration can sustain), then bisects to the saturation point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from infercast.errors import InfercastError
from infercast.sim.api import SimulationResult, build_workload, simulate
from infercast.sim.metrics import SLO
from infercast.sim.workload import Workload, synthetic

DEFAULT_FRACTIONS = (0.1, 0.25, 0.5, 0.7, 0.85, 1.0, 1.15, 1.3)
KEEP_UP = 0.95
"""A rate is sustainable only if, over the arrival window, requests complete at least this fast relative to
arrivals: a finite run can meet its SLOs while its queue is still growing."""


@dataclass
class RateSweep:
    """One row per rate, plus the saturation point."""

    table: pd.DataFrame
    saturation_rate_req_s: float | None
    capacity_req_s: float
    slo: SLO | None
    attainment: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "rates": self.table.to_dict(orient="records"),
            "saturation_rate_req_s": self.saturation_rate_req_s,
            "offline_throughput_req_s": self.capacity_req_s,
            "slo": self.slo.to_dict() if self.slo else None,
            "slo_attainment_target": self.attainment,
        }


def _row(rate: float, res: SimulationResult) -> dict[str, Any]:
    s = res.summary
    return {
        "rate_req_s": rate,
        "request_throughput_req_s": s["request_throughput_req_s"],
        "output_throughput_tok_s": s["output_throughput_tok_s"],
        "goodput_req_s": s["goodput_req_s"],
        "slo_attainment": s.get("slo_attainment", np.nan),
        "ttft_p50_s": s["ttft_s"]["p50"],
        "ttft_p99_s": s["ttft_s"]["p99"],
        "tpot_p50_s": s["tpot_s"]["p50"],
        "tpot_p99_s": s["tpot_s"]["p99"],
        "itl_p99_s": s["itl_s"]["p99"],
        "e2e_p50_s": s["e2e_s"]["p50"],
        "queue_p99_s": s["queue_s"]["p99"],
        "saturated": s["saturated"],
    }


def rate_sweep(
    model: str,
    gpu: str,
    *,
    rates: list[float] | None = None,
    goodput: list[str] | str | None = None,
    attainment: float = 0.9,
    refine_steps: int = 5,
    workload: Workload | None = None,
    trace: str | None = None,
    input_len: int | str | None = None,
    output_len: int | str | None = None,
    num_requests: int | None = None,
    burstiness: float = 1.0,
    seed: int = 0,
    **sim_kwargs: Any,
) -> RateSweep:
    """Simulate each rate; the saturation point is the highest rate the replica keeps up with (completions >= 95%
    of arrivals over the arrival window) while SLO attainment >= ``attainment`` (without SLOs: keeping up)."""
    slo = SLO.parse(goodput)
    if not 0 < attainment <= 1:
        raise InfercastError("must be in (0, 1]", field="attainment")
    base = build_workload(workload=workload, trace=trace, input_len=input_len, output_len=output_len,
                          num_requests=num_requests, offline=True, seed=seed)  # fmt: skip
    n = len(base)

    def run(rate: float) -> SimulationResult:
        if rate <= 0:
            raise InfercastError(f"rates must be > 0, got {rate}", field="rate")
        work = synthetic(n, base.prompt_len, base.output_len, arrival="gamma", rate=rate, burstiness=burstiness,
                         seed=seed)  # fmt: skip
        return simulate(model, gpu, workload=work, goodput=goodput, seed=seed, **sim_kwargs)

    offline = simulate(model, gpu, workload=base, seed=seed, **sim_kwargs)
    capacity = offline.summary["request_throughput_req_s"]
    if rates is None:
        rates = [capacity * f for f in DEFAULT_FRACTIONS]
    results = {float(r): run(float(r)) for r in sorted(rates)}

    def ok(res: SimulationResult) -> bool:
        s = res.summary
        keeps_up = s.get("served_to_arrived", 1.0) >= KEEP_UP and not s["saturated"]
        if slo is not None:
            return keeps_up and s["slo_attainment"] >= attainment
        return keeps_up

    passing = [r for r, res in results.items() if ok(res)]
    failing = [r for r, res in results.items() if not ok(res)]
    saturation = max(passing) if passing else None
    if saturation is not None:
        above = [r for r in failing if r > saturation]
        if above and refine_steps:
            lo, hi = saturation, min(above)
            for _ in range(refine_steps):
                mid = (lo + hi) / 2
                results[mid] = run(mid)
                lo, hi = (mid, hi) if ok(results[mid]) else (lo, mid)
            saturation = lo
    table = pd.DataFrame([_row(r, res) for r, res in sorted(results.items())])
    return RateSweep(table, saturation, capacity, slo, attainment)
