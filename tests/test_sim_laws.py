"""The simulator obeys the laws of serving: limits, conservation, monotonicity, and the fast path equals
stepping token by token."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from infercast import predict
from infercast.errors import DoesNotFitError, InfercastError
from infercast.sim.api import DisaggConfig, simulate
from infercast.sim.cluster import KVLink
from infercast.sim.workload import Workload, synthetic

GPU = "h100-sxm"
MODEL = "llama-3.1-8b"


def _close(a: dict, b: dict, rtol: float = 1e-9) -> None:
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_s"):
        for q in ("mean", "p50", "p90", "p99"):
            assert a[key][q] == pytest.approx(b[key][q], rel=rtol, abs=1e-12), (key, q)
    for key in ("output_throughput_tok_s", "request_throughput_req_s", "duration_s"):
        assert a[key] == pytest.approx(b[key], rel=rtol)
    for key in ("completed", "preemptions", "steps"):
        assert a[key] == b[key], key


EQUIVALENCE_CASES = {
    "chunked prefill": dict(input_len=2000, output_len="uniform:10,400", num_requests=150, rate=20),
    "prefill-first": dict(
        input_len=2000, output_len="uniform:10,400", num_requests=150, rate=20, scheduler="prefill-first"
    ),
    "static": dict(
        input_len=500, output_len="uniform:10,300", num_requests=120, rate=20, scheduler="static", max_num_seqs=32
    ),
    "recompute preemption": dict(
        input_len=3000, output_len="uniform:100,600", num_requests=120, rate=30, gpu_memory_utilization=0.3
    ),
    "swap preemption": dict(
        input_len=3000,
        output_len="uniform:100,600",
        num_requests=100,
        rate=30,
        gpu_memory_utilization=0.3,
        preemption="swap",
    ),
    "prefix caching": dict(input_len=500, output_len=100, num_requests=150, rate=20, prefix=(4, 2000)),
    "closed loop": dict(input_len=1000, output_len="uniform:10,300", num_requests=120, concurrency=16),
    "disaggregated": dict(input_len=1500, output_len=200, num_requests=100, rate=10, scheduler="disagg"),
    "two replicas": dict(
        input_len=1500, output_len=200, num_requests=100, rate=20, replicas=2, router="least_outstanding"
    ),
}


@pytest.mark.parametrize("case", sorted(EQUIVALENCE_CASES))
def test_skip_ahead_equals_step_by_step(case):
    kw = dict(EQUIVALENCE_CASES[case])
    fast = simulate(MODEL, GPU, seed=5, **kw)
    slow = simulate(MODEL, GPU, seed=5, step_mode=True, **kw)
    _close(fast.summary, slow.summary)
    np.testing.assert_allclose(fast.table.finish, slow.table.finish, rtol=1e-12)
    assert fast.summary["steps"] > 0


@pytest.mark.parametrize("model", ["gemma-2-9b", "qwen3-30b-a3b"])
def test_skip_ahead_equivalence_sliding_window_and_moe(model):
    kw = dict(input_len="uniform:100,6000", output_len="uniform:10,300", num_requests=80, rate=10, seed=2)
    _close(simulate(model, GPU, **kw).summary, simulate(model, GPU, step_mode=True, **kw).summary)


def test_low_rate_matches_single_request_prediction():
    res = simulate(MODEL, GPU, input_len=1000, output_len=200, num_requests=20, rate=0.01, seed=1)
    p = predict(MODEL, GPU, input_len=1000, output_len=200)
    # each request's TTFT is the prediction's, with its own varying overhead in place of the mean
    jitter = res.replicas[0].request_jitter
    assert jitter > 0
    ttft = np.asarray(res.table.first_token) - np.asarray(res.table.arrival)
    np.testing.assert_allclose(ttft - jitter * np.asarray(res.table.intake), p.ttft_s - jitter, rtol=1e-6)
    assert res["tpot_s"]["p50"] == pytest.approx(p.tpot_s, rel=1e-6)
    assert res["queue_s"]["p99"] == pytest.approx(0.0, abs=1e-9)


def test_an_overlap_scheduler_makes_a_request_arriving_mid_step_wait_one_more_step():
    kw = dict(input_len=512, output_len=200, num_requests=60, rate=4.0, seed=3)
    off = simulate(MODEL, GPU, overlap_scheduler=False, **kw)
    on = simulate(MODEL, GPU, overlap_scheduler=True, **kw)
    extra = on["ttft_s"]["mean"] - off["ttft_s"]["mean"]
    assert 0.3 * off["tpot_s"]["mean"] < extra < 1.5 * off["tpot_s"]["mean"]  # about one step more
    # a request reaching an idle engine starts at once either way
    lone = dict(input_len=512, output_len=20, num_requests=5, rate=0.01, seed=3)
    idle_on, idle_off = simulate(MODEL, GPU, overlap_scheduler=True, **lone), simulate(MODEL, GPU, **lone)
    assert idle_on["ttft_s"]["mean"] == pytest.approx(idle_off["ttft_s"]["mean"], rel=1e-12)


def test_vllm_from_0_14_takes_a_request_arriving_mid_step_into_the_step_after_next():
    """vLLM's async scheduling (default since 0.14) launches step k + 1 before step k's output is read, so the
    vllm-0.14 preset lags admission by a step; --no-async-scheduling (overlap_scheduler=False) removes the lag."""
    from infercast.specs.engine import get_engine

    assert get_engine("vllm-0.14").overlap_scheduler and not get_engine("vllm").overlap_scheduler
    kw = dict(input_len=512, output_len=200, num_requests=60, rate=4.0, seed=3, engine="vllm-0.14")
    lagged, plain = simulate(MODEL, GPU, **kw), simulate(MODEL, GPU, overlap_scheduler=False, **kw)
    extra = lagged["ttft_s"]["mean"] - plain["ttft_s"]["mean"]
    assert 0.3 * plain["tpot_s"]["mean"] < extra < 1.5 * plain["tpot_s"]["mean"]  # about one step more
    assert lagged["tpot_s"]["mean"] == pytest.approx(plain["tpot_s"]["mean"], rel=0.05)


def test_offline_throughput_approaches_step_capacity():
    res = simulate(MODEL, GPU, input_len=512, output_len=256, num_requests=512, offline=True, max_num_seqs=256)
    static = predict(MODEL, GPU, input_len=512, output_len=256, batch=256)
    # continuous batching of 256 slots sustains about what a static batch of 256 achieves
    assert res["output_throughput_tok_s"] == pytest.approx(static.output_throughput_tok_s, rel=0.15)
    assert res["mean_decode_batch"] > 100


def test_littles_law_from_replica_occupancy():
    res = simulate(
        MODEL,
        GPU,
        engine="ideal",
        input_len="uniform:200,2000",
        output_len="uniform:20,400",
        num_requests=600,
        rate=15,
        seed=3,
        sample_interval=0.0,
    )
    occ = res.occupancy()
    t = occ["t"].to_numpy()
    inside = (occ["running"] + occ["waiting"] + occ["prefilling"]).to_numpy()
    area = float(np.sum(inside[1:] * np.diff(t)))  # requests in the system, integrated over the samples
    e2e = res.requests()["e2e_s"].to_numpy()
    span = t[-1] - t[0]
    # L = λ W over the same window (requests in the system at sample times)
    assert area / span == pytest.approx(e2e.sum() / span, rel=0.05)


def test_every_request_finishes_with_its_exact_output_length():
    res = simulate(
        MODEL,
        GPU,
        input_len="lognormal:800,0.8",
        output_len="lognormal:150,0.9",
        num_requests=400,
        rate=25,
        gpu_memory_utilization=0.35,
        seed=4,
    )
    tb = res.table
    assert res["completed"] == 400
    assert (tb.generated == tb.output).all()
    assert (tb.first_token >= tb.arrival).all() and (tb.finish >= tb.first_token).all()
    for rep in res.replicas:  # every block returned
        assert rep.kv.private == 0 and rep.blocks.reserved == 0


def _assert_every_block_returned(res) -> None:
    for rep in res.replicas:
        kv = rep.kv
        assert kv.private == 0 and rep.blocks.reserved == 0
        assert kv.evictable == kv.cached_blocks  # nothing pinned: every cached prefix is evictable again
        assert all(refs == 0 for refs in kv.refs.values())
        assert kv.free + kv.cached_blocks == kv.num_blocks


@pytest.mark.parametrize("engine,utilization", [("vllm", 0.25), ("trtllm", 0.22)])
@pytest.mark.parametrize("block_size", [16, 32, 64])
def test_every_kv_block_is_returned_with_shared_prefixes(engine, utilization, block_size):
    # 16-token prompt hashes against 16/32/64-token engine blocks, in a cache small enough for preemptions (vLLM)
    # and evictions of cached prefixes; TensorRT-LLM reserves whole requests (GUARANTEED_NO_EVICT): never preempts
    res = simulate(
        MODEL,
        GPU,
        engine=engine,
        block_size=block_size,
        prefix=(40, 1000),
        input_len="uniform:50,600",
        output_len="uniform:10,600",
        num_requests=400,
        rate=60,
        gpu_memory_utilization=utilization,
        seed=2,
    )
    kv = res.replicas[0].kv
    assert res["completed"] == 400 and kv.evictions > 0
    assert (res["preemptions"] > 0) if engine == "vllm" else (res["preemptions"] == 0 and res["queue_s"]["p90"] > 0)
    assert res["prefix_cache_hit_rate"] > 0.15
    assert res.replicas[0].bs == block_size
    _assert_every_block_returned(res)
    tb = res.table
    # cached tokens are whole engine blocks of the 1000-token prefix: 992 with 16/32-token blocks, 960 with 64
    hit = tb.cached_tokens[tb.cached_tokens > 0]
    assert hit.size and (hit % block_size == 0).all() and hit.max() == 1000 // block_size * block_size


def test_prefix_cache_with_hash_blocks_that_do_not_divide_engine_blocks():
    # 24-token hashes against 16-token blocks share whole 48-token units (lcm): 960 of a 1000-token prefix
    work = synthetic(
        200, 300, 50, rate=20, prefix={"num_prompts": 2, "prompt_tokens": 1000, "hash_block_size": 24}, seed=3
    )
    res = simulate(MODEL, GPU, workload=work)
    assert res.replicas[0].kv.unit_tokens == 48
    assert res.table.cached_tokens.max() == 960
    _assert_every_block_returned(res)


def test_same_seed_same_result_different_seed_differs():
    kw = dict(input_len="uniform:100,2000", output_len="uniform:10,400", num_requests=200, rate=10)
    a, b = simulate(MODEL, GPU, seed=7, **kw), simulate(MODEL, GPU, seed=7, **kw)
    c = simulate(MODEL, GPU, seed=8, **kw)
    assert a.summary == b.summary
    assert a["ttft_s"]["mean"] != c["ttft_s"]["mean"]


def test_chunked_prefill_lowers_tpot_tail_on_mixed_workload():
    kw = dict(input_len="uniform:2000,8000", output_len="uniform:100,400", num_requests=200, rate=2.5, seed=1)
    chunked = simulate(MODEL, GPU, scheduler="chunked", max_num_batched_tokens=2048, **kw)
    prefill_first = simulate(MODEL, GPU, scheduler="prefill-first", max_num_batched_tokens=16384, **kw)
    assert chunked["tpot_s"]["p99"] < prefill_first["tpot_s"]["p99"]
    assert chunked["itl_s"]["p99"] < prefill_first["itl_s"]["p99"]


def test_prefix_caching_lowers_ttft_for_shared_prompts():
    kw = dict(input_len=200, output_len=50, num_requests=200, rate=5, prefix=(2, 4000), seed=1)
    cached = simulate(MODEL, GPU, **kw)
    uncached = simulate(MODEL, GPU, prefix_caching=False, **kw)
    assert cached["prefix_cache_hit_rate"] > 0.9
    assert uncached["prefix_cache_hit_rate"] == 0
    assert cached["ttft_s"]["mean"] < 0.5 * uncached["ttft_s"]["mean"]


def test_more_load_never_lowers_latency():
    base = synthetic(300, "uniform:200,3000", "uniform:20,300", arrival="gamma", rate=1.0, seed=11)
    previous = None
    for rate in (2, 6, 12, 24):
        work = Workload(base.arrival / rate, base.prompt_len, base.output_len)  # same pattern, compressed
        s = simulate(MODEL, GPU, workload=work).summary
        current = [s[k][q] for k in ("ttft_s", "tpot_s", "e2e_s") for q in ("p50", "p99")]
        if previous is not None:
            assert all(c >= p * 0.999 for c, p in zip(current, previous, strict=True)), (rate, current, previous)
        previous = current


def test_overload_reports_saturation_and_terminates():
    res = simulate(MODEL, GPU, input_len=4000, output_len=300, num_requests=400, rate=200)
    assert res["saturated"] and "exceeds" in res["saturation_reason"]
    assert res["completed"] == 400


def test_goodput_counts_requests_meeting_slos():
    kw = dict(input_len=1000, output_len=100, num_requests=200, rate=5, seed=2)
    loose = simulate(MODEL, GPU, goodput=["ttft:10000", "tpot:1000"], **kw)
    assert loose["goodput_req_s"] == pytest.approx(loose["request_throughput_req_s"])
    strict = simulate(MODEL, GPU, goodput="ttft:1 tpot:1", **kw)
    assert strict["goodput_req_s"] == 0 and strict["slo_attainment"] == 0


def test_preemption_when_kv_runs_short():
    res = simulate(
        MODEL, GPU, input_len=3000, output_len=800, num_requests=150, rate=50, gpu_memory_utilization=0.3, seed=1
    )
    assert res["preemptions"] > 0 and res["completed"] == 150


def test_disaggregation_removes_prefill_interference_from_decode():
    kw = dict(input_len=4000, output_len=300, num_requests=200, rate=3, seed=1)
    colocated = simulate(MODEL, GPU, max_num_batched_tokens=8192, **kw)
    disagg = simulate(MODEL, GPU, scheduler="disagg", disagg=DisaggConfig(1, 1, link=KVLink(50e9)), **kw)
    assert disagg["tpot_s"]["p99"] < colocated["tpot_s"]["p99"]
    assert disagg["completed"] == 200
    slow_link = simulate(MODEL, GPU, scheduler="disagg", disagg=DisaggConfig(1, 1, link=KVLink(1e9)), **kw)
    # the KV transfer (4000 tokens x 128 KiB over 1 GB/s: ~0.5 s) sits in the gap before the second token
    transfer = 4000 * 131072 / 1e9
    assert slow_link["e2e_s"]["p50"] - disagg["e2e_s"]["p50"] == pytest.approx(transfer, rel=0.1)
    assert slow_link["ttft_s"]["p50"] == pytest.approx(disagg["ttft_s"]["p50"], rel=1e-6)


def test_two_replicas_share_load():
    kw = dict(input_len=1000, output_len=200, num_requests=300, seed=1)
    one = simulate(MODEL, GPU, rate=6, **kw)
    two = simulate(MODEL, GPU, rate=12, replicas=2, **kw)
    assert two["request_throughput_req_s"] == pytest.approx(2 * one["request_throughput_req_s"], rel=0.1)
    assert two["tpot_s"]["mean"] == pytest.approx(one["tpot_s"]["mean"], rel=0.1)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(input_len=100, output_len=10, rate=0), "rate"),
        (dict(input_len=100, output_len=10, concurrency=0), "concurrency"),
        (dict(input_len=100, output_len=10), "rate"),
        (dict(input_len=100, output_len=10, rate=1, concurrency=2), "rate"),
        (dict(input_len=0, output_len=10, rate=1), "input_len"),
        (dict(input_len=200_000, output_len=10, rate=1), "workload"),
        (dict(input_len=100, output_len=10, rate=1, scheduler="fifo"), "scheduler"),
        (dict(input_len=100, output_len=10, rate=1, goodput="latency:5"), "goodput"),
    ],
)
def test_bad_inputs(kwargs, field):
    with pytest.raises(InfercastError) as exc:
        simulate(MODEL, GPU, num_requests=10, **kwargs)
    assert exc.value.field == field


def test_model_that_does_not_fit():
    with pytest.raises(DoesNotFitError, match="raise `tp`"):
        simulate("llama-3.1-70b", GPU, precision="bf16", input_len=100, output_len=10, rate=1, num_requests=5)


def test_empty_and_malformed_traces(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,abc\n")
    for path, needle in ((empty, "no requests"), (bad, "line 2"), (tmp_path / "none.csv", "no such file")):
        with pytest.raises(InfercastError, match=needle) as info:
            simulate(MODEL, GPU, trace=str(path))
        assert info.value.field == "trace"  # the option the user gave, not the loader's argument
        assert str(path) in str(info.value)


def test_closed_loop_clients_obey_littles_law():
    res = simulate(MODEL, GPU, input_len=1000, output_len=200, num_requests=300, concurrency=16, seed=1)
    e2e = res.requests()["e2e_s"].to_numpy()
    # N = X · R with N clients always in the system (no think time)
    assert res["request_throughput_req_s"] * e2e.mean() == pytest.approx(16, rel=0.05)
    single = predict(MODEL, GPU, input_len=1000, output_len=200, batch=16)
    assert res["tpot_s"]["p50"] == pytest.approx(single.tpot_s, rel=0.25)


def test_speculative_decoding_trades_verification_for_fewer_steps():
    from infercast.sim.speculative import SpeculativeConfig

    kw = dict(input_len=1000, output_len=300, num_requests=60, rate=2, seed=1)
    plain = simulate(MODEL, GPU, **kw)
    good = simulate(MODEL, GPU, speculative=SpeculativeConfig(4, 0.8), **kw)
    useless = simulate(MODEL, GPU, speculative=SpeculativeConfig(4, 0.0), **kw)
    assert good["tpot_s"]["mean"] < 0.6 * plain["tpot_s"]["mean"]
    assert useless["tpot_s"]["mean"] > plain["tpot_s"]["mean"]  # verifying 5 tokens to keep 1 costs more
    for res in (good, useless):
        assert (res.table.generated == res.table.output).all()
        assert all(rep.kv.private == 0 and rep.blocks.reserved == 0 for rep in res.replicas)
    assert SpeculativeConfig(4, 0.8).expected_tokens_per_step == pytest.approx((1 - 0.8**5) / 0.2)
    with pytest.raises(InfercastError):
        SpeculativeConfig(0, 0.5)


def test_speculative_decoding_with_a_draft_model_pays_the_drafts_decode_steps():
    from infercast.sim.speculative import SpeculativeConfig

    kw = dict(input_len=1000, output_len=300, num_requests=60, rate=2, seed=1)
    plain = simulate(MODEL, GPU, **kw)
    free = simulate(MODEL, GPU, speculative=SpeculativeConfig(4, 0.8, draft_cost=0.0), **kw)
    small = simulate(MODEL, GPU, speculative=SpeculativeConfig(4, 0.8, draft_model="llama-3.2-1b"), **kw)
    large = simulate(MODEL, GPU, speculative=SpeculativeConfig(4, 0.8, draft_model="llama-3.2-3b"), **kw)
    # same acceptance draws, so the TPOT differences are the drafts' own decode-step costs
    assert free["tpot_s"]["mean"] < small["tpot_s"]["mean"] < large["tpot_s"]["mean"]
    assert small["tpot_s"]["mean"] < 0.85 * plain["tpot_s"]["mean"]  # a 1B draft for an 8B target pays off
    draft = predict("llama-3.2-1b", GPU, input_len=1000, output_len=300)
    # each step adds ~4 draft decode steps of a 1B model to the verification pass
    per_step = (small["tpot_s"]["mean"] - free["tpot_s"]["mean"]) * SpeculativeConfig(4, 0.8).expected_tokens_per_step
    assert per_step == pytest.approx(4 * draft.tpot_s, rel=0.35)
    for res in (small, large):
        assert res["completed"] == 60
        _assert_every_block_returned(res)


def test_rate_sweep_finds_the_saturation_point():
    from infercast.sim.rate_sweep import rate_sweep

    kw = dict(input_len="uniform:200,2000", output_len="uniform:20,400", num_requests=300, seed=1)
    sweep = rate_sweep(MODEL, GPU, rates=[2, 8, 40], refine_steps=3, **kw)
    t = sweep.table
    assert t["rate_req_s"].is_monotonic_increasing and {2.0, 8.0, 40.0} <= set(t["rate_req_s"])
    for col in ("ttft_p50_s", "tpot_p50_s", "e2e_p50_s"):  # more load never lowers latency
        assert t[col].is_monotonic_increasing, col
    assert not t.loc[t["rate_req_s"] <= 8, "saturated"].any() and t.loc[t["rate_req_s"] == 40, "saturated"].all()
    # bisected between the last passing and the first failing rate, below the offline throughput
    assert 8 <= sweep.saturation_rate_req_s < 40 and len(t) == 3 + 3
    assert sweep.saturation_rate_req_s < 1.1 * sweep.capacity_req_s
    passing = t[~t["saturated"]]["rate_req_s"]
    assert sweep.saturation_rate_req_s == passing.max()
    # an SLO tighter than the unloaded TTFT fails every rate
    strict = rate_sweep(MODEL, GPU, rates=[2, 8], refine_steps=0, goodput="ttft:1", **kw)
    assert strict.saturation_rate_req_s is None and (strict.table["slo_attainment"] == 0).all()
    with pytest.raises(InfercastError) as info:
        rate_sweep(MODEL, GPU, rates=[2], rate=3, **kw)
    assert info.value.field == "rate"
    # the same sweep from a typed config (whose own load and SLOs the sweep replaces / keeps)
    from infercast.sim.api import config_from_keywords

    config = config_from_keywords(MODEL, GPU, rate=1.0, goodput="ttft:1", **kw)
    again = rate_sweep(config, rates=[2, 8], refine_steps=0)
    pd.testing.assert_frame_equal(again.table, strict.table)


def test_duration_runs_from_the_benchmark_start_to_the_last_completion():
    # t=0 is when the client starts; here the first request is sent 5 s later, and those 5 s count
    base = synthetic(100, 500, 50, rate=2, seed=3)
    res = simulate(MODEL, GPU, workload=Workload(base.arrival + 5.0, base.prompt_len, base.output_len))
    tb = res.table
    assert tb.arrival.min() > 5.0
    assert res["duration_s"] == pytest.approx(float(tb.finish.max()))
    assert res["request_throughput_req_s"] == pytest.approx(100 / tb.finish.max())


def test_one_definition_of_queueing():
    res = simulate(MODEL, GPU, input_len=3000, output_len=100, num_requests=200, rate=12, seed=3)
    tb, df = res.table, res.requests()
    queue = tb.scheduled - tb.visible  # reaching the engine (after the request overhead) -> first scheduled
    np.testing.assert_allclose(df["queue_s"], queue)
    assert res["queue_s"]["mean"] == pytest.approx(float(np.mean(queue)))
    rep = res.replicas[0]
    overhead = rep.request_overhead + rep.request_jitter * np.asarray(tb.intake)  # fixed + varying part
    np.testing.assert_allclose(df["scheduled_s"] - df["queue_s"] - df["arrival_s"], overhead, atol=1e-9)
    assert (df["ttft_s"] >= df["queue_s"] + overhead - 1e-12).all()


def test_disaggregated_hand_off_sends_the_fixed_state_too():
    """A prefill-to-decode hand-off sends the prompt's KV and the sequence's fixed state (DeepSeek-V4's window and
    compressor state): halving the link's bandwidth lengthens one request by exactly those bytes / bandwidth."""
    from infercast import memory_budget
    from infercast.specs.deployment import Deployment

    kw = dict(tp=8, precision="fp8", input_len=4096, output_len=8, num_requests=1, offline=True, scheduler="disagg")
    e2e = [
        simulate("deepseek-v4-flash", "h200", disagg=DisaggConfig(1, 1, link=KVLink(bw, 0.0)), **kw)["e2e_s"]["mean"]
        for bw in (1e9, 2e9)
    ]
    mem = memory_budget(Deployment.resolve("deepseek-v4-flash", "h200", tp=8, precision="fp8"))
    assert mem.state_bytes_per_sequence > 0
    sent = mem.kv_bytes_per_token * 4096 + mem.state_bytes_per_sequence
    assert (e2e[0] - e2e[1]) * 2e9 == pytest.approx(sent, rel=1e-6)
