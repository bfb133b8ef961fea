"""Latency against offered load, and the SLO capacity: the highest rate that keeps up and still meets the SLOs.

Each rate replays the same requests (lengths and shared prefixes, from the given lengths, trace or workload)
with fresh arrivals at that rate. Without explicit rates the sweep brackets the replica's capacity, estimated
from an offline run (all requests at once: the throughput the configuration can sustain), then bisects to
the SLO capacity. A rate passes when its run is not ``saturated`` (the same test as ``simulate``'s
summary, :mod:`infercast.sim.saturation`) and meets the SLOs; the served/arrived part of that test needs
a few hundred requests per run (the default is 1000).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from infercast.errors import InfercastError, require_fraction, require_positive_int, require_positive_number
from infercast.sim.api import SimulationResult, config_from_keywords, simulate
from infercast.sim.config import SimulationConfig
from infercast.sim.metrics import SLO
from infercast.sim.workload import WORKLOAD_FIELDS, Workload, WorkloadSpec, retime

DEFAULT_FRACTIONS = (0.1, 0.25, 0.5, 0.7, 0.85, 1.0, 1.15, 1.3)
"""Rates tried without explicit ``rates``, as fractions of the offline throughput (the capacity estimate)."""
SWEEP_SETS = ("rate", "concurrency", "offline")
"""Workload options the sweep sets itself (each rate is an open-loop run)."""


@dataclass
class RateSweep:
    """One row per rate, plus the SLO capacity."""

    table: pd.DataFrame
    slo_capacity_req_s: float | None
    """Highest rate that is not saturated and meets the SLOs (``attainment`` of requests); None: no rate did.
    Without SLOs, the highest rate the configuration keeps up with. (It is not where latency starts to
    climb: that is the knee, usually well below it.)"""
    capacity_req_s: float
    slo: SLO | None
    attainment: float

    @property
    def saturation_rate_req_s(self) -> float | None:
        """Former name of :attr:`slo_capacity_req_s` (kept for callers of 0.1)."""
        return self.slo_capacity_req_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "rates": self.table.to_dict(orient="records"),
            "slo_capacity_req_s": self.slo_capacity_req_s,
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
    model: SimulationConfig | str,
    gpu: str | None = None,
    *,
    rates: list[float] | None = None,
    goodput: list[str] | str | None = None,
    attainment: float = 0.9,
    refine_steps: int = 5,
    **options: Any,
) -> RateSweep:
    """Simulate each rate; the SLO capacity is the highest rate the configuration keeps up with (not
    ``saturated``: completions keep pace with arrivals, see :mod:`infercast.sim.saturation`) while SLO
    attainment >= ``attainment`` (without SLOs: keeping up).

    ``model`` a :class:`SimulationConfig` (its load is replaced by each rate; its SLOs apply unless ``goodput``
    is given), or a model with ``gpu`` and ``options``: the workload keywords of
    :class:`~infercast.sim.workload.WorkloadSpec` (``input_len`` / ``output_len``, ``trace`` or ``workload``,
    ``num_requests``, ``arrival``, ``burstiness``, ``prefix``, ``seed``; not ``rate``, ``concurrency`` or
    ``offline``: the sweep sets the load) and any other :func:`~infercast.sim.api.simulate` keyword, passed to
    every run. Every rate replays the same requests (lengths, shared prefixes) with fresh arrivals at that rate.
    """
    attainment = require_fraction("attainment", attainment)
    refine_steps = require_positive_int("refine_steps", refine_steps, minimum=0)
    config, template, base, slo = _sweep_config(model, gpu, goodput, options)
    seed = template.seed
    if rates is not None:
        rates = [require_positive_number("rates", r) for r in rates]
        if not rates:
            raise InfercastError("needs at least one rate", field="rates")

    def simulate_at(work: Workload, slo: SLO | None) -> SimulationResult:
        return simulate(
            replace(
                config, workload=WorkloadSpec(workload=work, seed=seed), observe=replace(config.observe, goodput=slo)
            )
        )

    def run(rate: float) -> SimulationResult:
        return simulate_at(
            retime(base, rate=rate, arrival=template.arrival, burstiness=template.burstiness, seed=seed), slo
        )

    def ok(res: SimulationResult) -> bool:
        keeps_up = not res.summary["saturated"]
        if slo is not None:
            return keeps_up and res.summary["slo_attainment"] >= attainment
        return keeps_up

    capacity = simulate_at(base, None).summary["request_throughput_req_s"]
    if rates is None:
        rates = [capacity * f for f in DEFAULT_FRACTIONS]
    results = {float(r): run(float(r)) for r in sorted(set(rates))}
    slo_capacity = _refine(results, run, ok, refine_steps)
    table = pd.DataFrame([_row(r, res) for r, res in sorted(results.items())])
    return RateSweep(table, slo_capacity, capacity, slo, attainment)


def _sweep_config(
    model: SimulationConfig | str, gpu: str | None, goodput: list[str] | str | None, options: dict[str, Any]
) -> tuple[SimulationConfig, WorkloadSpec, Workload, SLO | None]:
    """The sweep's configuration, its requests at rate = inf (every request at t=0: the offline capacity run) as
    a spec and built, and its SLOs, from a :class:`SimulationConfig` or a model, gpu and keywords (see
    :func:`rate_sweep`)."""
    if isinstance(model, SimulationConfig):
        if gpu is not None or options:
            raise InfercastError("give a SimulationConfig alone, or a model and gpu with keywords", field="config")
        template = replace(model.workload, rate=math.inf, concurrency=None, offline=False)
        slo = SLO.parse(goodput) if goodput is not None else model.observe.goodput
        return model, template, template.build(), slo
    if gpu is None:
        raise InfercastError("give a gpu with a model (or a SimulationConfig alone)", field="gpu")
    for name in SWEEP_SETS:
        if name in options and options[name] not in (None, False):
            raise InfercastError("the rate sweep sets the load itself; give the rates with `rates`", field=name)
    workload_options = {k: options.pop(k) for k in WORKLOAD_FIELDS if k in options and k not in SWEEP_SETS}
    template = WorkloadSpec(**workload_options, rate=math.inf)  # validates the workload options once
    slo = SLO.parse(goodput)
    base = template.build()
    return config_from_keywords(model, gpu, workload=base, seed=template.seed, **options), template, base, slo


def _refine(
    results: dict[float, SimulationResult],
    run: Callable[[float], SimulationResult],
    ok: Callable[[SimulationResult], bool],
    steps: int,
) -> float | None:
    """The highest passing rate of ``results``, bisected ``steps`` times towards the lowest failing rate above it
    (each probe added to ``results``); None when no rate passed."""
    passing = [r for r, res in results.items() if ok(res)]
    failing = [r for r, res in results.items() if not ok(res)]
    best = max(passing) if passing else None
    if best is None:
        return None
    above = [r for r in failing if r > best]
    if above and steps:
        lo, hi = best, min(above)
        for _ in range(steps):
            mid = (lo + hi) / 2
            results[mid] = run(mid)
            lo, hi = (mid, hi) if ok(results[mid]) else (lo, mid)
        best = lo
    return best
