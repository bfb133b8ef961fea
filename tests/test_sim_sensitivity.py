"""The step-time half of the sensitivity runs (issue 36 part 3): ``step_time_scale`` multiplies step time, so on a
light run whose TTFT is all engine steps TTFT moves with it one for one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infercast.cost.profile import load_profile
from infercast.sim.api import config_from_keywords, run
from infercast.sim.sensitivity import ttft_sensitivity
from infercast.sim.speculative import SpeculativeConfig

STEPS_ONLY = replace(
    load_profile("h100-sxm", "hopper", "vllm"), request_overhead_s=0.0, request_jitter_s=0.0, stream_token_s=0.0
)
"""A profile without per-request overheads or an API front-end: every second of latency is an engine step."""


def _mean(config, metric: str, **engine) -> float:
    result = run(replace(config, engine=replace(config.engine, **engine)))
    return float(result.summary.to_dict()[metric]["mean"])


def test_ttft_at_ten_percent_longer_steps_is_ten_percent_longer():
    config = config_from_keywords(
        "llama-3.1-8b", "h100-sxm", concurrency=2, input_len=128, output_len=32, num_requests=12, profile=STEPS_ONLY
    )
    base = _mean(config, "ttft_s")
    swing = ttft_sensitivity(config, base)
    assert swing["ttft_s_step_time_plus_10pct"] == pytest.approx(1.1 * base, rel=0.03)
    assert swing["ttft_s_step_time_minus_10pct"] == pytest.approx(0.9 * base, rel=0.03)
    assert swing["ttft_s_kv_pool_minus_10pct"] == pytest.approx(base, rel=1e-9)  # no cliff: the pool is idle


def test_step_time_scale_reaches_speculative_steps():
    """Draft and verify passes are steps too (the reference simulator does not model them: checked here)."""
    config = config_from_keywords(
        "llama-3.1-8b",
        "h100-sxm",
        concurrency=1,
        input_len=128,
        output_len=64,
        num_requests=4,
        profile=STEPS_ONLY,
        speculative=SpeculativeConfig(3, 0.7),
    )
    assert _mean(config, "tpot_s", step_time_scale=1.1) == pytest.approx(1.1 * _mean(config, "tpot_s"), rel=1e-6)
    draft = SpeculativeConfig(3, 0.7, draft_model="llama-3.2-1b")
    config = replace(config, engine=replace(config.engine, speculative=draft))
    assert _mean(config, "tpot_s", step_time_scale=1.1) == pytest.approx(1.1 * _mean(config, "tpot_s"), rel=1e-6)
