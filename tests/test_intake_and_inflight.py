"""The engine's varying per-request latency (request_jitter_s) and the in-flight scheduler (TensorRT-LLM's whole
prompts beside the decodes)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from infercast import predict
from infercast.cost.step import cost_model
from infercast.sim.api import simulate
from infercast.specs.deployment import Deployment

MODEL, GPU = "llama-3.1-8b", "h100-sxm"


def _profile(jitter: float, overhead: float = 0.004):
    base = cost_model(Deployment.resolve(MODEL, GPU)).profile
    return replace(base, request_overhead_s=overhead, request_jitter_s=jitter)


def test_each_request_reaches_the_engine_after_the_fixed_and_its_own_varying_overhead():
    res = simulate(MODEL, GPU, input_len=200, output_len=20, num_requests=2000, rate=50, seed=4, profile=_profile(0.01))
    tb = res.table
    extra = np.asarray(tb.visible) - np.asarray(tb.arrival) - 0.004
    np.testing.assert_allclose(extra, 0.01 * np.asarray(tb.intake), atol=1e-12)
    assert (extra >= 0).all()
    assert extra.mean() == pytest.approx(0.01, rel=0.1)  # exponential draws of mean request_jitter_s
    assert np.std(extra) == pytest.approx(0.01, rel=0.15)


def test_the_draws_follow_the_seed_and_no_jitter_is_the_fixed_overhead_alone():
    kw = dict(input_len=300, output_len=30, num_requests=200, rate=20)
    a = simulate(MODEL, GPU, seed=1, profile=_profile(0.02), **kw)
    b = simulate(MODEL, GPU, seed=1, profile=_profile(0.02), **kw)
    c = simulate(MODEL, GPU, seed=2, profile=_profile(0.02), **kw)
    assert a["ttft_s"] == b["ttft_s"]
    assert not np.allclose(np.asarray(a.table.intake), np.asarray(c.table.intake))
    none = simulate(MODEL, GPU, seed=1, profile=_profile(0.0), **kw)
    np.testing.assert_array_equal(np.asarray(none.table.visible), np.asarray(none.table.arrival) + 0.004)


def test_requests_reach_the_engine_in_the_order_their_overheads_end():
    """Sent together, they are admitted in order of their varying overheads (FCFS on reaching the engine), not in
    the order they were sent."""
    res = simulate(
        MODEL,
        GPU,
        input_len=3000,
        output_len=10,
        num_requests=40,
        offline=True,
        seed=3,
        scheduler="prefill-first",
        max_num_batched_tokens=3000,
        profile=_profile(0.05),
    )
    tb = res.table
    order = np.argsort(np.asarray(tb.visible), kind="stable")
    scheduled = np.asarray(tb.scheduled)[order]
    assert (np.diff(scheduled) >= 0).all()
    assert not (np.diff(np.asarray(tb.scheduled)) >= 0).all()  # the sending order is not kept


def test_predict_adds_the_mean_of_the_varying_overhead():
    p = predict(MODEL, GPU, input_len=1000, output_len=50, profile=_profile(0.03))
    assert p.ttft_s == pytest.approx(p.prefill.time_s + 0.004 + 0.03, rel=1e-12)


def test_equal_length_closed_loop_clients_drift_apart_with_jitter():
    """Equal lengths keep closed-loop clients in lockstep: every wave of 16 prompts arrives at once and is prefilled
    in one step. A varying request overhead splits the waves (late arrivals miss the step), so the prefill steps
    carry fewer prompts and mean TTFT falls."""
    kw = dict(
        input_len=2000,
        output_len=64,
        concurrency=16,
        num_requests=160,
        seed=0,
        scheduler="inflight",
        max_num_batched_tokens=40_000,
        trace_steps=10_000,
    )
    lockstep = simulate(MODEL, GPU, profile=_profile(0.0), **kw)
    drifting = simulate(MODEL, GPU, profile=_profile(0.03), **kw)
    assert {tokens for tokens, _ in _steps(lockstep)} == {16 * 2000}
    assert min(tokens for tokens, _ in _steps(drifting)) < 8 * 2000
    assert drifting["ttft_s"]["mean"] < 0.9 * lockstep["ttft_s"]["mean"]


def _steps(res):
    return [(s.prefill_tokens, s.decode_seqs) for s in res.recorder.steps if s.prefill_tokens]


def test_inflight_adds_whole_prompts_beside_the_decodes_within_the_budget():
    kw = dict(
        input_len=1500, output_len=40, num_requests=12, rate=40, seed=5, max_num_batched_tokens=3200, trace_steps=10_000
    )
    inflight = _steps(simulate(MODEL, GPU, scheduler="inflight", **kw))
    assert inflight and all(tokens % 1500 == 0 for tokens, _ in inflight)  # prompts are never split
    assert all(tokens + decodes <= 3200 for tokens, decodes in inflight)
    assert any(decodes for _, decodes in inflight)  # prompts run beside the decodes, which do not wait
    chunked = _steps(simulate(MODEL, GPU, scheduler="chunked", **kw))
    assert any(tokens % 1500 for tokens, _ in chunked)  # chunked prefill cuts a prompt to fill the budget


def test_inflight_runs_a_prompt_longer_than_the_budget_when_nothing_else_runs():
    res = simulate(
        MODEL,
        GPU,
        scheduler="inflight",
        input_len=5000,
        output_len=5,
        num_requests=2,
        offline=True,
        max_num_batched_tokens=2048,
        trace_steps=100,
    )
    assert res["completed"] == 2
    assert [tokens for tokens, _ in _steps(res)] == [5000, 5000]  # whole, alone, one after the other


def test_the_trtllm_preset_runs_the_inflight_scheduler():
    res = simulate(MODEL, GPU, engine="trtllm", input_len=500, output_len=10, num_requests=4, rate=10)
    assert res.config["scheduler"] == "inflight"


def _most_at_once(res) -> int:
    """Most requests holding KV at the same instant (admitted, not finished)."""
    tb = res.table
    events = sorted([(t, 1) for t in tb.scheduled] + [(t, -1) for t in tb.finish], key=lambda e: (e[0], e[1]))
    now = most = 0
    for _, delta in events:
        now += delta
        most = max(most, now)
    return most


def test_inflight_admits_a_request_only_when_its_whole_length_fits_beside_the_reservations():
    # TensorRT-LLM's GUARANTEED_NO_EVICT: each request holds blocks for prompt + output from admission, so the
    # pool caps how many run at once, nothing is preempted, and the rest queue; chunked prefill (vLLM) takes
    # blocks as tokens arrive, runs more at once and preempts when the cache fills
    kw = dict(input_len=1000, output_len=600, num_requests=60, offline=True, gpu_memory_utilization=0.24, block_size=16)
    reserving = simulate(MODEL, GPU, scheduler="inflight", **kw)
    per_request = -(-1600 // 16)
    blocks = reserving.replicas[0].kv.num_blocks
    assert 3 <= blocks // per_request < 60  # the pool holds a few whole requests, not all
    assert _most_at_once(reserving) == blocks // per_request
    assert reserving["preemptions"] == 0 and reserving["completed"] == 60
    growing = simulate(MODEL, GPU, scheduler="chunked", **kw)
    assert _most_at_once(growing) > blocks // per_request and growing["preemptions"] > 0
