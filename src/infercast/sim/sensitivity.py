"""Sensitivity of a simulated run's TTFT to its KV pool and its step time (issue 36 part 3): a cliff shows as a
large swing."""

from __future__ import annotations

from dataclasses import replace

from infercast.errors import DoesNotFitError
from infercast.sim.api import run
from infercast.sim.config import SimulationConfig

VARIED = (
    ("ttft_s_kv_pool_minus_10pct", 0.9, 1.0),
    ("ttft_s_kv_pool_plus_10pct", 1.1, 1.0),
    ("ttft_s_step_time_minus_10pct", 1.0, 0.9),
    ("ttft_s_step_time_plus_10pct", 1.0, 1.1),
)
"""Each sensitivity run: its key and what it multiplies the :class:`~infercast.sim.config.EngineConfig`'s
``kv_pool_scale`` and ``step_time_scale`` by."""


def ttft_sensitivity(config: SimulationConfig, ttft_s: float) -> dict[str, float | None]:
    """Mean TTFT (s) of the same run with a KV pool 10 % smaller and larger, and with every step 10 % shorter and
    longer (None: that run does not fit). Under a light load TTFT moves about in proportion to step time (less
    where request overheads are much of it, more near saturation); away from a KV cliff it barely moves with the
    pool, on one the pool swings it."""
    out: dict[str, float | None] = {"ttft_s": ttft_s}
    for label, kv_scale, step_scale in VARIED:
        base = config.engine
        engine = replace(
            base, kv_pool_scale=base.kv_pool_scale * kv_scale, step_time_scale=base.step_time_scale * step_scale
        )
        try:
            res = run(replace(config, engine=engine))
        except DoesNotFitError:
            out[label] = None
            continue
        out[label] = float(res.summary.to_dict()["ttft_s"]["mean"])
    return out
