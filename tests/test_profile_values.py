"""Cost parameters are checked where they enter a profile: a hand-made or mistyped value is refused by name."""

from __future__ import annotations

import math

import pytest

import infercast
from infercast.cost.profile import load_profile, set_profile_override
from infercast.errors import InfercastError


@pytest.fixture
def vllm_h100():
    return load_profile("h100-sxm", "hopper", "vllm")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("stream_token_s", -1e-4, "stream_token_s must be >= 0"),
        ("request_overhead_s", float("nan"), "request_overhead_s must be >= 0"),
        ("hbm_efficiency", 0.0, "hbm_efficiency must be > 0"),
        ("gemm_eff_max.bf16", -0.5, "gemm_eff_max.bf16 must be > 0"),
        ("step_overhead_s", math.inf, "step_overhead_s must be finite"),
        ("seq_overhead_s", "fast", "seq_overhead_s must be a number"),
    ],
)
def test_a_bad_parameter_value_is_refused_by_name(vllm_h100, key, value, message) -> None:
    with pytest.raises(InfercastError, match=message) as err:
        vllm_h100.with_values({key: value}, "test")
    assert err.value.field == "profile"


def test_valid_values_pass_and_graph_replay_may_be_unbounded(vllm_h100) -> None:
    p = vllm_h100.with_values({"stream_token_s": 0.0, "graph_max_tokens": math.inf, "hbm_efficiency": 0.9}, "test")
    assert (p.stream_token_s, p.graph_max_tokens, p.hbm_efficiency) == (0.0, math.inf, 0.9)


def test_an_override_with_a_negative_time_fails_the_prediction_with_a_clear_error() -> None:
    set_profile_override("h100-sxm", {"hardware": "h100-sxm", "engines": {"vllm": {"request_overhead_s": -0.01}}})
    try:
        with pytest.raises(InfercastError, match="request_overhead_s must be >= 0"):
            infercast.predict("llama-3.1-8b", "h100-sxm", engine="vllm", input_len=512, output_len=64)
    finally:
        set_profile_override("h100-sxm", None)
    assert infercast.predict("llama-3.1-8b", "h100-sxm", engine="vllm", input_len=512, output_len=64).ttft_s > 0
