"""Sensitivity of a simulated run's TTFT to its KV pool (issue 36 part 3): a cliff shows as a large swing."""

from __future__ import annotations

from dataclasses import replace

from infercast.errors import DoesNotFitError
from infercast.sim.api import run
from infercast.sim.config import SimulationConfig


def kv_sensitivity(config: SimulationConfig, ttft_s: float) -> dict[str, float | None]:
    """Mean TTFT (s) of the same run with a KV pool 10 % smaller and 10 % larger: a cliff shows as a large
    swing. (Step time +-10 % is not varied here: it scales latencies about proportionally away from a cliff.)"""
    out: dict[str, float | None] = {"ttft_s": ttft_s}
    for label, scale in (("ttft_s_kv_pool_minus_10pct", 0.9), ("ttft_s_kv_pool_plus_10pct", 1.1)):
        engine = replace(config.engine, kv_pool_scale=scale)
        try:
            res = run(replace(config, engine=engine))
        except DoesNotFitError:
            out[label] = None
            continue
        out[label] = float(res.summary.to_dict()["ttft_s"]["mean"])
    return out
