"""The API server's serial front-end (infercast.cost.front_end): its queue arithmetic, and what it does to a
simulated closed loop: output tokens/s capped near 1 / stream_token_s, the wait landing in TTFT, not TPOT."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from infercast import predict
from infercast.analysis.error_bands import FRONT_END_BINDS
from infercast.analysis.sweep import sweep
from infercast.cost.front_end import FrontEnd, static_batch_delays
from infercast.cost.profile import load_profile
from infercast.sim import cluster
from infercast.sim.api import simulate
from infercast.sim.config import DisaggConfig
from infercast.sim.workload import builtin_trace
from tests.cli_helpers import run, run_json


def test_an_idle_front_end_delays_a_step_s_tokens_by_their_own_work():
    fe = FrontEnd(1e-4)
    # 10 tokens at the end of a 5 ms step: they leave 0.1 ms apart, on average 0.55 ms after the step
    assert fe.emit(0.0, 0.005, 10) == pytest.approx(0.55e-3)
    assert fe.backlog_at(0.005) == pytest.approx(1e-3)
    assert fe.backlog_at(0.0055) == pytest.approx(0.5e-3)
    assert fe.backlog_at(0.5) == 0.0
    assert fe.backlog_at(0.001) == pytest.approx(1e-3)  # before the last step fed in: its backlog then
    fe.emit(0.005, 0.02, 8, steps=3)
    assert fe.work == pytest.approx((10 + 3 * 8) * 1e-4)  # its busy time: every token's work, spans included


def test_a_span_equals_its_steps_one_at_a_time():
    """One update for k steps (the fast simulator's decode spans) equals k updates (the reference's steps), for
    steps that grow longer, whether the queue grows (w > dt), drains (w < dt) or crosses over."""
    for tokens, dts in (
        (64, [3e-3, 3.5e-3, 4e-3, 4.5e-3]),
        (8, [3e-3, 3.1e-3, 3.3e-3]),
        (40, [3.0e-3, 3.8e-3, 4.2e-3, 5.0e-3, 6.0e-3]),
    ):
        stepwise, span = FrontEnd(1e-4), FrontEnd(1e-4)
        for fe in (stepwise, span):
            fe.emit(0.0, 0.01, 100)  # a backlog of 10 ms at t = 10 ms
        t = 0.012
        for dt in dts:
            stepwise.emit(t, t + dt, tokens)
            t += dt
        span.emit(0.012, t, tokens, steps=len(dts), first=dts[0])
        assert span.backlog == pytest.approx(stepwise.backlog, rel=1e-12)
        assert span.delay == pytest.approx(stepwise.delay, rel=1e-12)


def test_a_saturated_front_end_caps_the_closed_loop():
    """128 clients on a TP 8 Llama-3.1-8B stream ~16k tokens/s without a front-end; behind one that takes 200 us
    per token they get at most 5k tokens/s. Far past its rate the front-end shares itself among the streams, so
    each client's tokens arrive ~128 x 200 us apart (TPOT ~26 ms against ~7 ms) and first tokens come later."""
    base = load_profile("h100-sxm", "hopper", "vllm")
    runs = {}
    for token_s in (0.0, 2e-4):
        res = simulate(
            "llama-3.1-8b",
            "h100-sxm",
            tp=8,
            input_len=256,
            output_len=128,
            concurrency=128,
            num_requests=1280,
            profile=replace(base, stream_token_s=token_s),
        )
        df = res.requests()
        span = float(df.finish_s.max() - df.arrival_s.min())
        runs[token_s] = (float(df.output_tokens.sum()) / span, res["ttft_s"]["mean"], res["tpot_s"]["mean"])
    free, capped = runs[0.0], runs[2e-4]
    assert free[0] > 1.5 / 2e-4
    assert 0.9 / 2e-4 <= capped[0] <= 1.02 / 2e-4
    assert capped[1] > 1.3 * free[1]
    assert capped[2] == pytest.approx(128 * 2e-4, rel=0.15)
    assert free[2] < capped[2] / 2


def test_a_binding_front_end_is_reported_with_its_rate():
    """The summary says how busy the front-end was; past FRONT_END_BINDS a warning names it as what sets the
    latencies, with the rate it sustains. Without a front-end (vLLM's fit) neither appears."""
    base = load_profile("h100-sxm", "hopper", "vllm")
    kw = dict(tp=8, input_len=256, output_len=128, concurrency=128, num_requests=1280)
    capped = simulate("llama-3.1-8b", "h100-sxm", profile=replace(base, stream_token_s=2e-4), **kw)
    busy = capped.summary.front_end_busy_fraction
    tokens = float(capped.requests().output_tokens.sum())
    assert busy == pytest.approx(tokens * 2e-4 / capped.summary.duration_s, rel=1e-9)
    assert busy >= FRONT_END_BINDS
    (warning,) = [w for w in capped.confidence.warnings if "front-end binds" in w]
    assert f"busy {busy:.0%}" in warning and "5,000 streamed tokens/s per server (200 us per token)" in warning
    free = simulate("llama-3.1-8b", "h100-sxm", **kw)
    assert free.summary.front_end_busy_fraction is None and "front_end_busy_fraction" not in free.summary.to_dict()
    assert not [w for w in free.confidence.warnings if "front-end" in w]
    light = simulate("llama-3.1-8b", "h100-sxm", profile=replace(base, stream_token_s=2e-5), **kw)
    assert light.summary.front_end_busy_fraction < FRONT_END_BINDS
    assert not [w for w in light.confidence.warnings if "front-end" in w]


@pytest.mark.parametrize(
    "load",
    [dict(workload=builtin_trace("azure_conv").head(1500), rate=12.0), dict(concurrency=48, num_requests=480)],
    ids=["open-loop", "closed-loop"],
)
def test_one_replica_runs_the_time_ordered_steps_without_polling_every_replica(monkeypatch, load):
    """One replica fed in time order (behind a front-end, or by closed-loop clients) runs in
    ``Coordinator._run_alone``; every request's timestamps and the step count equal those of the general
    time-ordered loop over replicas."""
    kw = (
        dict(engine="trtllm", **load)
        if "workload" in load
        else dict(engine="trtllm", input_len=1024, output_len=256, **load)
    )
    calls = []
    alone = cluster.Coordinator._run_alone
    monkeypatch.setattr(cluster.Coordinator, "_run_alone", lambda self, order: calls.append(1) or alone(self, order))
    fast = simulate("llama-3.1-8b", "h100-sxm", **kw)
    assert calls == [1]
    monkeypatch.setattr(cluster.Coordinator, "_run_alone", lambda self, order: self._run_in_time_order(order))
    slow = simulate("llama-3.1-8b", "h100-sxm", **kw)
    for field in ("arrival", "visible", "scheduled", "first_token", "last_token", "finish"):
        assert np.array_equal(getattr(fast.table, field), getattr(slow.table, field), equal_nan=True), field
    assert fast.recorder.step_count == slow.recorder.step_count
    assert np.isfinite(fast.table.finish).all()


@pytest.mark.parametrize(("batch", "steps", "decode_s"), [(1, 0, 0.0), (8, 1, 0.004), (64, 255, 1.2), (128, 511, 3.3)])
def test_the_static_batch_case_equals_the_queue_fed_step_by_step(batch, steps, decode_s):
    """predict's and sweep's static batch behind a front-end (`static_batch_delays`): the first tokens at the
    prefill's end, then the decode steps, fed to an idle FrontEnd one call each."""
    fe = FrontEnd(1e-4)
    first = fe.emit(0.0, 0.5, batch)
    last = fe.emit(0.5, 0.5 + decode_s, batch, steps=steps) if steps else first
    got = static_batch_delays(1e-4, batch, decode_s, steps)
    assert (float(got[0]), float(got[1])) == pytest.approx((first, last), rel=1e-12, abs=1e-15)


def test_predict_and_sweep_pace_a_large_batch_at_the_front_end_s_rate():
    """128 streams through TensorRT-LLM's fitted front-end (100 us per token) take 12.8 ms per token, twice the
    engine's 6.4 ms decode step on 8 H100s: TPOT is the front-end's pace, ITL the step, throughput under 10k
    tokens/s; sweep gives the same rows, the simulator the same TPOT within 5 %. One stream is not held up."""
    kw = dict(tp=8, engine="trtllm", input_len=1024, output_len=512)
    big, one = predict("llama-3.1-8b", "h100-sxm", batch=128, **kw), predict("llama-3.1-8b", "h100-sxm", batch=1, **kw)
    assert big.tpot_last_s == pytest.approx(128 * 1e-4, rel=0.01) and big.itl_s < big.tpot_last_s / 1.8
    assert big.output_throughput_tok_s < 1e4 and big.to_dict()["front_end_s"] == big.front_end_s > 0
    assert one.tpot_s == one.itl_s and one.front_end_s == pytest.approx(1e-4)
    row = sweep("llama-3.1-8b", "h100-sxm", batches=128, input_lens=1024, output_lens=512, tps=8, engines="trtllm")
    assert (row.ttft_s.iloc[0], row.tpot_s.iloc[0]) == pytest.approx((big.ttft_s, big.tpot_s), rel=1e-9)
    sim = simulate("llama-3.1-8b", "h100-sxm", concurrency=128, num_requests=128, **kw)
    assert sim.summary.tpot_s.mean == pytest.approx(big.tpot_s, rel=0.05)
    plain = predict("llama-3.1-8b", "h100-sxm", batch=128, **{**kw, "engine": "vllm"})
    assert plain.front_end_s == 0.0 and plain.tpot_last_s == plain.itl_s


def test_the_front_end_can_be_set_from_the_command_line(capsys):
    """`--stream-token-us` replaces the engine profile's front-end: 0 takes TensorRT-LLM's away (as post-processing
    workers would), a value gives vLLM one; a negative one is refused naming the option."""
    args = ("--engine", "trtllm", "--tp", "8", "--input-len", "1024", "--output-len", "512")
    paced = run_json(capsys, "predict", *args, "--batch", "128")
    free = run_json(capsys, "predict", *args, "--batch", "128", "--stream-token-us", "0")
    assert paced["tpot_last_s"] > 1.8 * free["tpot_last_s"] and free["tpot_last_s"] == free["itl_s"]
    assert free["front_end_s"] == 0
    sim = run_json(
        capsys,
        "simulate",
        "--tp",
        "8",
        "--concurrency",
        "64",
        "--num-requests",
        "128",
        "--input-len",
        "1024",
        "--output-len",
        "256",
        "--stream-token-us",
        "150",
    )
    assert sim["front_end_busy_fraction"] > 0.5
    code, _, err = run(capsys, "predict", "--stream-token-us", "-3")
    assert code == 2 and "stream_token_us" in err and ">= 0" in err


def test_a_disaggregated_run_reports_its_busiest_front_end():
    """The prefill pool's front-end streams first tokens only; the decode pool's streams the rest. The summary and
    the warning follow the busiest (here the decode pool's, past FRONT_END_BINDS), not a mean that would halve it."""
    res = simulate(
        "llama-3.1-8b",
        "h100-sxm",
        engine="trtllm",
        tp=2,
        scheduler="disagg",
        disagg=DisaggConfig(1, 1, 2, 2),
        input_len=1024,
        output_len=512,
        concurrency=128,
        num_requests=512,
    )
    works = sorted(rep.front_end.work for rep in res.replicas)
    assert works[0] < 0.05 * works[1]  # the prefill pool's front-end is nearly idle
    assert res.summary.front_end_busy_fraction == pytest.approx(min(works[1] / res.summary.duration_s, 1.0))
    assert res.summary.front_end_busy_fraction >= FRONT_END_BINDS
    assert any("front-end binds" in w for w in res.confidence.warnings)
