"""Sensitivity of a simulated run's TTFT to its KV pool and its step time (issue 36 part 3): a cliff shows as a
large swing."""

from __future__ import annotations

from dataclasses import replace

from infercast.errors import DoesNotFitError
from infercast.sim.api import run
from infercast.sim.config import SimulationConfig

VARIED = (
    ("ttft_s_kv_pool_minus_10pct", "kv_pool_scale", 0.9),
    ("ttft_s_kv_pool_plus_10pct", "kv_pool_scale", 1.1),
    ("ttft_s_step_time_minus_10pct", "step_time_scale", 0.9),
    ("ttft_s_step_time_plus_10pct", "step_time_scale", 1.1),
)
"""Each sensitivity run: its key, the :class:`~infercast.sim.config.EngineConfig` knob it sets and the value."""


def ttft_sensitivity(config: SimulationConfig, ttft_s: float) -> dict[str, float | None]:
    """Mean TTFT (s) of the same run with a KV pool 10 % smaller and larger, and with every step 10 % shorter and
    longer. Away from a cliff TTFT barely moves with the pool and moves about in proportion to step time; on a
    cliff both swing far more (None: the run does not fit with the smaller pool)."""
    out: dict[str, float | None] = {"ttft_s": ttft_s}
    for label, knob, scale in VARIED:
        engine = replace(config.engine, **{knob: scale})
        try:
            res = run(replace(config, engine=engine))
        except DoesNotFitError:
            out[label] = None
            continue
        out[label] = float(res.summary.to_dict()["ttft_s"]["mean"])
    return out
