"""The step cost model: operator bookkeeping checked by hand, roofline floors, and the fast paths
(compiled scalar function, decode table, closed-form run sums) checked against ``step_time`` itself."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infercast.cost.batch import FEATURES, NUM_FEATURES, F, StepBatch
from infercast.cost.compiled import DecodeTable, compile_scalar
from infercast.cost.series import sum_max_linear, sum_max_lines, sum_steps, total_steps_time
from infercast.cost.step import StepCostModel
from infercast.errors import InfercastError
from infercast.specs.deployment import Deployment
from infercast.specs.engine import get_engine

# dense GQA, MoE with TP/EP, MLA + MoE at fp8, sliding-window + MoE at mxfp4, alternating sliding window,
# gated-DeltaNet linear attention + MoE (its chunks in series)
DEPLOYMENTS = {
    "llama-8b": dict(model="llama-3.1-8b", gpu="h100-sxm"),
    "llama-70b-fp8-tp4": dict(model="llama-3.1-70b", gpu="h100-sxm", tp=4, precision="fp8"),
    "mixtral-tp2-ep2": dict(model="mixtral-8x7b", gpu="h100-sxm", tp=2, ep=2),
    "deepseek-v3-tp8": dict(model="deepseek-v3", gpu="h200", tp=8, precision="fp8"),
    "gpt-oss-20b": dict(model="gpt-oss-20b", gpu="h100-sxm", precision="mxfp4-moe"),
    "gemma-2-9b-a100": dict(model="gemma-2-9b", gpu="a100-80gb"),
    "qwen3.5-tp4-b200": dict(model="qwen3.5-397b-a17b", gpu="b200", tp=4, precision="fp8"),
}


def _dep(name: str, engine: str = "vllm") -> Deployment:
    kw = dict(DEPLOYMENTS[name])
    return Deployment.resolve(kw.pop("model"), kw.pop("gpu"), engine=engine, **kw)


def _model(name: str, engine: str = "vllm") -> StepCostModel:
    return StepCostModel(_dep(name, engine))


def _random_batches(rng: np.random.Generator, window: int | None, count: int) -> list[StepBatch]:
    batches = []
    for _ in range(count):
        prefill = [(int(rng.integers(1, 3000)), int(rng.integers(0, 20000))) for _ in range(rng.integers(0, 4))]
        decode = rng.integers(1, 40000, size=rng.integers(0 if prefill else 1, 300)).tolist()
        batches.append(StepBatch.from_items(prefill, decode, window=window))
    return batches


# ----- fast paths agree with step_time ------------------------------------------------------------------------
# CUDA graphs for any small step / for decode steps only / decode only plus an unfused engine's per-layer time /
# a per-token all-reduce time (vllm-0.14's allreduce_token_s)
@pytest.mark.parametrize("engine", ["vllm", "trtllm", "torch", "vllm-0.14"])
@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_compiled_scalar_matches_step_time(name, engine):
    model = _model(name, engine)
    fn = compile_scalar(model)
    batches = _random_batches(np.random.default_rng(1), model.dep.model.sliding_window, 40)
    for batch in batches:
        expected = float(model.step_time(batch)[0])
        assert fn(**dict(zip(FEATURES, batch.x[:, 0].tolist(), strict=True))) == pytest.approx(expected, rel=1e-12)


def test_allreduce_token_time_adds_per_token_per_call_at_tp_above_one():
    """``allreduce_token_s`` adds that many seconds per step token per all-reduce call (the all-reduce row's
    kernels) to the all-reduce row, and nothing where there is no all-reduce (TP 1)."""
    for name, calls in (("llama-70b-fp8-tp4", 2 * 80 + 1), ("llama-8b", 0)):
        dep = _dep(name)
        base = StepCostModel(dep).profile
        off, on = (
            StepCostModel(dep, replace(base, allreduce_token_s=0.0)),
            StepCostModel(dep, replace(base, allreduce_token_s=25e-9)),
        )
        batch = StepBatch.from_items([(2048, 0)], [1000] * 16)
        tokens = float(batch.x[F["tokens"], 0])
        extra = float(on.step_time(batch)[0] - off.step_time(batch)[0])
        assert extra == pytest.approx(25e-9 * calls * tokens, rel=1e-9, abs=1e-15)
        if calls:
            i = on.names.index("tp_allreduce")
            assert on.kernels[i, 0] == calls and "25 ns per token per call" in on.sources[i]


def test_a_launched_capture_size_bounds_the_graphed_steps_in_both_paths():
    """A launch's largest CUDA-graph step (EngineSpec.graph_max_tokens) replaces the profile's: decodes of 16
    sequences replay, 64 launch eagerly, and the compiled step function agrees with step_time on both."""
    dep = _dep("llama-8b")
    small = Deployment.resolve(dep.model, dep.hardware, engine=dep.engine.model_copy(update={"graph_max_tokens": 16}))
    model, default = StepCostModel(small), StepCostModel(dep)
    fn = compile_scalar(model)
    for seqs, graphed in ((16, True), (64, False)):
        batch = StepBatch.from_items((), [1000] * seqs)
        assert bool(model.step_time(batch)[0] == default.step_time(batch)[0]) is graphed
        assert fn(**dict(zip(FEATURES, batch.x[:, 0].tolist(), strict=True))) == pytest.approx(
            float(model.step_time(batch)[0]), rel=1e-12
        )


def test_decode_only_graphs_count_sequences_per_attention_rank():
    """Engines that capture generation batches by batch size (TensorRT-LLM, SGLang) replay a draft-verify step of
    B sequences x (1 + k) tokens in the graph of B: the check counts sequences, not tokens. Where each
    attention-DP rank captures its own (TensorRT-LLM), the limit is per rank. Both paths agree."""
    dep = _dep("llama-8b", engine="trtllm")

    def limited(size: int) -> StepCostModel:
        engine = dep.engine.model_copy(update={"graph_max_tokens": size})
        return StepCostModel(Deployment.resolve(dep.model, dep.hardware, engine=engine))

    verify = StepBatch.from_items((), [1000] * 64)
    verify.x[F["seqs"], 0] = 16  # 16 sequences x (1 + 3 drafts) query tokens, as the simulator's verify step
    at, above, below = (float(limited(n).step_time(verify)[0]) for n in (16, 10**6, 15))
    assert at == above < below
    fn = compile_scalar(limited(16))
    assert fn(**dict(zip(FEATURES, verify.x[:, 0].tolist(), strict=True))) == pytest.approx(at, rel=1e-12)
    engine = dep.engine.model_copy(update={"graph_max_tokens": 16})
    wide = Deployment.resolve("qwen3-30b-a3b", "h100-sxm", tp=1, ep=4, attention_dp=4, engine=engine)
    assert StepCostModel(wide).graph_max_tokens == 16 * 4  # four ranks, each capturing batches of up to 16


def test_decode_only_graphs_launch_a_small_prompt_step_eagerly():
    """An engine whose CUDA graphs cover generation batches alone (TensorRT-LLM, SGLang) launches a step with a
    prompt chunk eagerly, however few its tokens; one with piecewise graphs for mixed batches (vLLM V1) replays
    it. Decode-only steps replay as graphs in both. Same profile: only the engine's graph scope differs."""
    dep = _dep("llama-8b", engine="trtllm")
    assert dep.engine.cuda_graphs == "decode" and get_engine("vllm").cuda_graphs == "tokens"
    piecewise = Deployment.resolve(
        dep.model, dep.hardware, engine=dep.engine.model_copy(update={"cuda_graphs": "tokens"})
    )
    # launches alone: without the eager host floor (tested below), which would hide them in a small prompt step
    p = replace(StepCostModel(dep).profile, eager_layer_host_s=0.0)
    decode_only, tokens = StepCostModel(dep, p), StepCostModel(piecewise, p)
    assert p == tokens.profile and p.kernel_overhead_eager_s > p.kernel_overhead_graph_s
    decodes = StepBatch.from_items((), [300] * 8)
    assert decode_only.step_time(decodes)[0] == tokens.step_time(decodes)[0]
    mixed = StepBatch.from_items([(64, 0)], [300] * 8)
    assert float(mixed.x[F["tokens"], 0]) <= p.graph_max_tokens
    launches = decode_only.breakdown(mixed).overhead_s.sum() - tokens.breakdown(mixed).overhead_s.sum()
    kernels = float((decode_only.kernels[:, 0] * (decode_only.breakdown(mixed).time_s[:, 0] > 0)).sum())
    assert launches == pytest.approx(kernels * (p.kernel_overhead_eager_s - p.kernel_overhead_graph_s))
    assert decode_only.step_time(mixed)[0] - tokens.step_time(mixed)[0] == pytest.approx(launches)


def test_an_unfused_engine_pays_its_layer_overhead_once_per_layer_per_step():
    """The torch engine (infercast's harness) adds layers x layer_overhead to each step: the graph value to a
    decode step, the eager value to a step with a prompt chunk; every other engine adds nothing."""
    torch_model = _model("llama-8b", "torch")
    p = torch_model.profile
    assert p.layer_overhead_graph_s > 0 and p.layer_overhead_eager_s > p.layer_overhead_graph_s
    assert _model("llama-8b", "vllm").profile.layer_overhead_graph_s == 0.0
    layers = torch_model.dep.model.num_layers
    for batch, per_layer in (
        (StepBatch.from_items((), [300] * 8), p.layer_overhead_graph_s),
        (StepBatch.from_items([(64, 0)], [300] * 8), p.layer_overhead_eager_s),
    ):
        engine = torch_model.breakdown(batch).engine_overhead_s[0]
        base = p.step_overhead_s + p.seq_overhead_s * float(batch.x[F["seqs"], 0])
        assert engine == pytest.approx(base + layers * per_layer)


def test_an_eager_step_takes_at_least_the_hosts_time_per_layer():
    """With eager_layer_host_s (TensorRT-LLM's closed-loop mixed steps suggest ~0.65 ms per layer:
    benchmarks/mixed_steps.py; no preset sets it), a small step with prompt tokens, launched eagerly, takes layers x
    eager_layer_host_s plus the engine's step overhead, a big one its kernels' time; decode steps (CUDA graphs)
    keep the kernels' time; the breakdown counts the gap as engine overhead. Any step outside the graphs is
    floored, decode-only ones too."""
    dep = _dep("llama-8b", "trtllm")
    kernels = StepCostModel(dep)
    assert kernels.profile.eager_layer_host_s == 0.0  # no preset sets it (docs/accuracy-notes.md)
    p = replace(kernels.profile, eager_layer_host_s=0.65e-3)
    trt = StepCostModel(dep, p)
    floor = dep.model.num_layers * p.eager_layer_host_s
    small = StepBatch.from_items([(256, 0)], [1000] * 8)
    engine = p.step_overhead_s + p.seq_overhead_s * 9
    assert kernels.step_time(small)[0] < floor
    assert trt.step_time(small)[0] == pytest.approx(floor + engine, rel=1e-12)
    out = trt.breakdown(small)
    assert out.time_s[:, 0].sum() + out.engine_overhead_s[0] == pytest.approx(floor + engine, rel=1e-12)
    big = StepBatch.from_items([(8192, 0)], [1000] * 8)
    assert kernels.step_time(big)[0] > floor + engine and trt.step_time(big)[0] == kernels.step_time(big)[0]
    decodes = StepBatch.from_items((), [1000] * 8)
    assert trt.step_time(decodes)[0] == kernels.step_time(decodes)[0] < floor
    fn = compile_scalar(trt)  # the simulator's fast path agrees
    for batch in (small, big, decodes):
        features = dict(zip(FEATURES, batch.x[:, 0].tolist(), strict=True))
        assert fn(**features) == pytest.approx(float(trt.step_time(batch)[0]), rel=1e-12)
    # a decode-only step outside the graphs (vLLM graphs up to 512 tokens: 600 sequences run eagerly) is floored
    # too, and one inside them is not
    vdep = _dep("llama-8b", "vllm")
    vp = replace(StepCostModel(vdep).profile, eager_layer_host_s=1.1e-3)  # this repository's engine on an H100
    vfloor = vdep.model.num_layers * vp.eager_layer_host_s
    vllm_kernels, vllm_floored = StepCostModel(vdep), StepCostModel(vdep, vp)
    eager, graphed = StepBatch.from_items((), [16] * 600), StepBatch.from_items((), [16] * 8)
    per_step = lambda n: vp.step_overhead_s + vp.seq_overhead_s * n  # noqa: E731
    assert vllm_kernels.step_time(eager)[0] < vfloor
    assert vllm_floored.step_time(eager)[0] == pytest.approx(vfloor + per_step(600), rel=1e-12)
    assert vllm_floored.step_time(graphed)[0] == vllm_kernels.step_time(graphed)[0] < vfloor
    vfn = compile_scalar(vllm_floored)
    for batch in (eager, graphed):
        features = dict(zip(FEATURES, batch.x[:, 0].tolist(), strict=True))
        assert vfn(**features) == pytest.approx(float(vllm_floored.step_time(batch)[0]), rel=1e-12)


def test_decode_attention_without_split_kv_is_bound_by_its_thread_blocks():
    """The torch engine's SDPA decode attention runs one thread block per sequence and KV head, each streaming at
    most decode_attn_cta_bytes_s: at batch 1 (8 blocks for Llama-3.1-8B) the blocks bind, at batch 64 (512 blocks)
    HBM does. Serving engines' split-KV kernels are bandwidth-bound at any batch."""
    torch_model, vllm_model = _model("llama-8b", "torch"), _model("llama-8b", "vllm")
    rate = torch_model.profile.decode_attn_cta_bytes_s
    assert rate > 0 and vllm_model.profile.decode_attn_cta_bytes_s == 0.0 and not vllm_model.cta_bound
    i = torch_model.names.index("attention_decode")
    heads = torch_model.dep.model.kv_heads_per_rank(1)
    bw = torch_model.dep.hardware.memory.bandwidth_bytes_s * torch_model.profile.attn_decode_efficiency
    for seqs in (1, 64):
        out = torch_model.breakdown(StepBatch.from_items((), [4096] * seqs))
        nbytes = float(out.bytes[i, 0])
        expected = nbytes / min(bw, seqs * heads * rate)
        assert out.memory_s[i, 0] == pytest.approx(expected, rel=1e-12)
    assert seqs * heads * rate > bw > heads * rate  # the two regimes were both tested


@pytest.mark.parametrize("engine", ["vllm", "torch"])
@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_decode_table_matches_step_time(name, engine):
    model = _model(name, engine)
    window = model.dep.model.sliding_window
    table = DecodeTable(model, 256)
    n = np.array([1, 3, 17, 64, 256])
    ctx = np.array([5.0, 900.0, 4096.0, 20000.0, 70.0])
    batch = StepBatch.uniform(decode_seqs=n, context=ctx, window=window)
    sw = n * (np.minimum(ctx, window) if window else ctx)
    np.testing.assert_allclose(table.step_times(n, n * ctx, sw), model.step_time(batch), rtol=1e-12)


@given(
    a0=st.floats(0, 1),
    da=st.floats(-1e-3, 1e-3),
    b0=st.floats(0, 1),
    db=st.floats(-1e-3, 1e-3),
    n=st.integers(0, 3000),
)
@settings(max_examples=300, deadline=None)
def test_sum_of_max_of_two_lines_matches_brute_force(a0, da, b0, db, n):
    j = np.arange(n)
    brute = float(np.maximum(a0 + j * da, b0 + j * db).sum())
    assert sum_max_lines(a0, da, b0, db, n) == pytest.approx(brute, rel=1e-9, abs=1e-9)
    # the vectorised form (taken above 16 elements) agrees element-wise
    vec = sum_max_linear(np.full(20, a0), np.full(20, da), np.full(20, b0), np.full(20, db), np.full(20, n))
    np.testing.assert_allclose(vec, brute, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", ["llama-8b", "deepseek-v3-tp8", "mixtral-tp2-ep2"])
def test_closed_form_decode_run_equals_stepping(name):
    """A static batch's decode phase, summed in closed form, equals the sum of its steps one by one."""
    model = _model(name)
    batch, start, steps = 24, 3000, 700
    first = StepBatch.uniform(decode_seqs=batch, context=start)
    delta = np.zeros((NUM_FEATURES, 1))
    delta[F["decode_kv"]] = delta[F["decode_kv_win"]] = batch
    each = model.step_time(StepBatch.uniform(decode_seqs=batch, context=start + np.arange(steps)))
    assert float(total_steps_time(model, first, delta, steps)[0]) == pytest.approx(float(each.sum()), rel=1e-9)
    sums = sum_steps(model, first, delta, steps)
    assert float(sums.total_s[0]) == pytest.approx(float(each.sum()), rel=1e-9)
    assert float(sums.steps[0]) == steps


def test_run_sums_refuse_changing_token_counts():
    model = _model("llama-8b")
    delta = np.zeros((NUM_FEATURES, 1))
    delta[F["tokens"]] = 1
    with pytest.raises(ValueError, match="must not change"):
        sum_steps(model, StepBatch.uniform(decode_seqs=4, context=10), delta, 5)


# ----- operator bookkeeping by hand ---------------------------------------------------------------------------
def _op(model: StepCostModel, batch: StepBatch, name: str, what: str = "flops") -> float:
    b = model.breakdown(batch)
    return float(getattr(b, what)[b.names.index(name), 0])


def test_linear_layer_flops_are_two_per_parameter_per_token():
    model = _model("llama-8b")
    spec = model.dep.model
    tokens = 1000
    b = model.breakdown(StepBatch.from_items([(tokens, 0)], prefill_samples=0))
    gemm = sum(float(b.flops[i, 0]) for i, k in enumerate(b.kinds) if k == "gemm")
    linear_params = spec.total_params - spec.embedding_params - spec.lm_head_params - spec.norm_params
    assert gemm == pytest.approx(2 * tokens * linear_params, rel=1e-12)
    # the LM head runs only for tokens that sample: none here, one when the chunk finishes the prompt
    assert _op(model, StepBatch.from_items([(tokens, 0)], prefill_samples=0), "lm_head") == 0
    assert _op(model, StepBatch.from_items([(tokens, 0)]), "lm_head") == pytest.approx(2 * spec.lm_head_params)


def test_prefill_attention_flops_follow_causal_pairs():
    model = _model("llama-8b")
    spec = model.dep.model
    c = 2048
    flops = _op(model, StepBatch.from_items([(c, 0)]), "attention_prefill")
    # QK^T and PV: 2 FLOPs per multiply-add, head_dim each, over every causal (query, key) pair and head
    pairs = c * (c + 1) / 2
    assert flops == pytest.approx(4 * spec.head_dim * spec.num_attention_heads * spec.num_layers * pairs)
    # a second chunk on top of a cached first one attends to the cache too
    later = _op(model, StepBatch.from_items([(c, c)]), "attention_prefill")
    assert later / flops == pytest.approx((c * c + pairs) / pairs)


def test_decode_kv_bytes_gqa_and_mla():
    llama = _model("llama-8b", engine="ideal")
    ctx = 4096
    read = _op(llama, StepBatch.from_items(decode=[ctx]), "attention_decode", "bytes")
    per_token = 32 * 8 * 128 * 2 * 2  # layers x KV heads x head dim x (K, V) x bf16
    assert read == pytest.approx(ctx * per_token, rel=1e-3)  # plus the query/output rows
    ds = _model("deepseek-v3-tp8", engine="ideal")
    read = _op(ds, StepBatch.from_items(decode=[ctx]), "attention_decode", "bytes")
    latent = 61 * (512 + 64) * ds.dep.kv_format.bytes_per_element  # one compressed latent per token, every rank
    assert read == pytest.approx(ctx * latent, rel=0.02)


def test_sliding_window_layers_read_at_most_the_window():
    model = _model("gpt-oss-20b", engine="ideal")
    spec = model.dep.model
    w = spec.sliding_window

    def kv_read(ctx: int) -> float:
        return _op(model, StepBatch.from_items(decode=[ctx], window=w), "attention_decode", "bytes")

    per_layer_token = spec.kv_elements_per_token_per_layer * model.dep.kv_format.bytes_per_element
    # growing the context by 1000 tokens adds reads in the full-attention layers only
    grow = kv_read(21000) - kv_read(20000)
    assert grow == pytest.approx(1000 * per_layer_token * spec.num_full_attention_layers, rel=1e-9)
    assert kv_read(w // 2) < kv_read(2 * w)


def test_moe_streams_only_the_experts_its_tokens_touch():
    model = _model("mixtral-tp2-ep2")
    full = model.weight_bytes
    one = model.weight_bytes_streamed(1)
    many = model.weight_bytes_streamed(4096)
    assert one < 0.5 * full  # 1 token: 2 of 8 experts per layer, split over 2 EP ranks
    assert many == pytest.approx(full, rel=1e-6)  # thousands of tokens touch every expert
    assert one < model.weight_bytes_streamed(8) < model.weight_bytes_streamed(64) < many


def test_tensor_parallel_collectives():
    single = _model("llama-8b")
    assert not any(k == "comm" for k in single.kinds)
    dep = Deployment.resolve("llama-3.1-8b", "h100-sxm", tp=4)
    model = StepCostModel(dep)
    spec = dep.model
    tokens = 512
    got = _op(model, StepBatch.from_items([(tokens, 0)]), "tp_allreduce", "bytes")
    count = 2 * spec.num_layers + 1
    assert got == pytest.approx(count * 2 * 3 / 4 * spec.hidden_size * 2 * tokens)  # ring: 2(N-1)/N per byte
    # expert parallelism over the TP group: every rank holds every token, the TP all-reduce combines the experts'
    # partial outputs and nothing is dispatched; with attention DP tokens are dispatched by two all-to-alls
    moe = _model("mixtral-tp2-ep2")
    assert "ep_all_to_all" not in moe.names and "expert_allreduce" not in moe.names
    mix = moe.dep.model
    got = _op(moe, StepBatch.from_items([(tokens, 0)]), "tp_allreduce", "bytes")
    assert got == pytest.approx((2 * mix.num_layers + 1) * 2 * 1 / 2 * mix.hidden_size * 2 * tokens)
    wide = StepCostModel(Deployment.resolve("deepseek-v3", "h200", tp=1, ep=8, attention_dp=8, precision="fp8"))
    assert "ep_all_to_all" in wide.names


def test_ring_share_is_the_one_ring_factor():
    """2(N-1)/N bytes per byte of buffer for an all-reduce, (N-1)/N for the others; the ring fallback curve sends
    that share of each message (operators' link bytes are checked against it above)."""
    from infercast.cost.collectives import _ring
    from infercast.cost.ring import ring_share

    assert ring_share("all_reduce", 8) == 2 * 7 / 8
    assert ring_share("all_gather", 8) == ring_share("alltoall", 8) == 7 / 8
    assert ring_share("all_reduce", 1) == 0.0
    curve = _ring("all_reduce", 4, 1e9, 0.0)
    assert curve.seconds[-1] == pytest.approx(ring_share("all_reduce", 4) * curve.sizes[-1] / 1e9, rel=1e-12)


def test_ring_latency_counts_ring_steps():
    """Without a measured curve an all-reduce of N GPUs pays (N-1)·alpha (alpha per all-reduce hop, two ring
    steps), a gather or all-to-all (N-1)·alpha/2 (N-1 steps), a send alpha/2; the fallback curve agrees."""
    from infercast.cost.collectives import _ring
    from infercast.cost.ring import ring_steps

    assert [ring_steps(k, 8) for k in ("all_reduce", "all_gather", "alltoall", "p2p")] == [14, 7, 7, 1]
    model = StepCostModel(Deployment.resolve("llama-3.1-70b", "mi300x", tp=8))  # no measured collective curves
    assert model.curves == []
    alpha = model.profile.allreduce_latency_s
    L = model.dep.model.num_layers
    latency = dict(zip(model.names, model.latency[:, 0], strict=True))
    assert latency["tp_allreduce"] == pytest.approx((2 * L + 1) * 7 * alpha, rel=1e-12)
    assert latency["logits_gather"] == pytest.approx(7 * alpha / 2, rel=1e-12)
    assert _ring("all_gather", 8, 1e9, alpha).seconds[0] == pytest.approx(7 * alpha / 2 + 7 / 8 * 128 / 1e9)


def test_gemm_time_prices_the_step_models_gemm_roofline():
    """``cost.kernels.gemm_time`` (calibration's GEMM records) and a GEMM row of the step model take the same
    parameters and form: for every GEMM of a one-layer model, at GEMV to prefill sizes, the step model's
    max(compute, memory) is gemm_time less its eager launch (it adds gemm_latency_s and its own launch cost)."""
    from infercast.cost.kernels import gemm_time
    from infercast.specs.catalog import get_model
    from infercast.specs.sharding import rank_linears
    from infercast.specs.truncate import truncated

    dep = Deployment.resolve(truncated(get_model("llama-3.1-8b"), 1), "h100-sxm")
    model = StepCostModel(dep)
    p, hw = model.profile, dep.hardware
    for m in (1, 7, 64, 512, 8192):
        bd = model.breakdown(StepBatch.uniform(prefill_seqs=1, chunk=m))
        for lin in rank_linears(dep.model, 1, 1):
            if lin.name == "embedding":
                continue
            rows = 1 if lin.name == "lm_head" else m  # the LM head runs on the sampled row only
            i = model.names.index(lin.name)
            roof = max(bd.compute_s[i, 0], bd.memory_s[i, 0])
            alone = gemm_time(p, hw, dep.compute_key, rows, lin.n, lin.k) - p.kernel_overhead_eager_s
            assert alone == pytest.approx(roof, rel=1e-9), (lin.name, m)


def test_elementwise_flop_counts():
    """RoPE: x·cos − y·sin (3 FLOPs) per rotated q/k element; RMSNorm with residual add: 5 per element."""
    model = _model("llama-8b")
    spec = model.dep.model
    tokens = 100
    batch = StepBatch.from_items([(tokens, 0)])
    heads = spec.num_attention_heads + spec.num_kv_heads
    assert _op(model, batch, "rope_kv_write") == pytest.approx(tokens * spec.num_layers * 3 * heads * spec.head_dim)
    norms = spec.num_layers * spec.norms_per_layer + 1
    assert _op(model, batch, "norms") == pytest.approx(tokens * norms * 5 * spec.hidden_size)


def test_collectives_run_over_nvlink_or_the_host_link():
    """Without a measured curve (L4) the ring formula runs over the PCIe link; with one (H100) the curve prices
    the all-reduce and the link bandwidth is not used."""
    model = StepCostModel(Deployment.resolve("llama-3.1-8b", "l4", tp=2))  # PCIe Gen4 (no NVLink)
    i = model.names.index("tp_allreduce")
    assert model.inv_bw[i, 0] == pytest.approx(1 / (32e9 * model.profile.link_efficiency))
    model = StepCostModel(Deployment.resolve("llama-3.1-8b", "h100-sxm", tp=2))
    i = model.names.index("tp_allreduce")
    assert model.inv_bw[i, 0] == 0.0 and i in [j for j, *_ in model.curves]
    assert model.sources[i].startswith("measured: aiconfigurator-core")


def test_tp_shards_the_weights():
    one = StepCostModel(Deployment.resolve("llama-3.1-70b", "h100-sxm", precision="fp8"))
    four = _model("llama-70b-fp8-tp4")
    assert four.weight_bytes == pytest.approx(one.weight_bytes / 4, rel=0.01)


# ----- roofline floors and monotonicity -----------------------------------------------------------------------
@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_no_operator_beats_its_roofline(name):
    """Fitted efficiencies are at most 1: every operator takes at least FLOPs/peak and bytes/bandwidth."""
    model = _model(name)
    hw = model.dep.hardware
    for batch in _random_batches(np.random.default_rng(7), model.dep.model.sliding_window, 10):
        b = model.breakdown(batch)
        for i, kind in enumerate(b.kinds):
            t = float(b.time_s[i, 0])
            if kind != "comm":
                assert t >= float(b.bytes[i, 0]) / hw.memory.bandwidth_bytes_s * (1 - 1e-12)
            if kind in ("gemm", "attention"):
                peak = hw.peak(model.table.rows[i].compute_key)
                assert t >= float(b.flops[i, 0]) / peak * (1 - 1e-12)


def test_ideal_decode_step_is_weights_and_kv_over_bandwidth():
    model = _model("llama-8b", engine="ideal")
    bw = model.dep.hardware.memory.bandwidth_bytes_s
    ctx = 1000
    t = float(model.step_time(StepBatch.from_items(decode=[ctx]))[0])
    floor = (model.weight_bytes + ctx * model.dep.model.kv_bytes_per_token(2)) / bw
    assert floor <= t < 1.05 * floor


def test_ideal_engine_is_the_pure_roofline():
    """``ideal``: each operator takes max(FLOPs / datasheet peak, bytes / datasheet bandwidth), nothing more."""
    model = _model("llama-8b", engine="ideal")
    hw = model.dep.hardware
    for batch in (StepBatch.from_items([(8192, 0)]), StepBatch.from_items([(300, 100)], [50, 7000, 9000])):
        b = model.breakdown(batch)
        expected = 0.0
        for i, row in enumerate(model.table.rows):
            peak = hw.peak(row.compute_key) if row.compute_key else hw.peak_flops["fp32"]
            expected += max(float(b.flops[i, 0]) / peak, float(b.bytes[i, 0]) / hw.memory.bandwidth_bytes_s)
        assert float(model.step_time(batch)[0]) == pytest.approx(expected, rel=1e-12)
    # a long prefill is dominated by tensor-core FLOPs (GEMMs and attention); norms, rotary and activations
    # are memory-bound and take the rest
    b = model.breakdown(StepBatch.from_items([(8192, 0)]))
    tensor = sum(float(b.flops[i, 0]) for i, k in enumerate(b.kinds) if k in ("gemm", "attention"))
    assert tensor / hw.peak("bf16") > 0.85 * float(b.time_s[:, 0].sum())


@given(
    ctx=st.integers(1, 60000),
    extra=st.integers(1, 5000),
    seqs=st.integers(1, 256),
    more=st.integers(1, 256),
)
@settings(max_examples=60, deadline=None)
def test_step_time_grows_with_context_and_batch(ctx, extra, seqs, more):
    model = _model("llama-8b")

    def t(n: int, c: int) -> float:
        return float(model.step_time(StepBatch.uniform(decode_seqs=n, context=c))[0])

    assert t(seqs, ctx + extra) >= t(seqs, ctx)
    assert t(seqs + more, ctx) >= t(seqs, ctx)


def test_compute_efficiency_rises_with_gemm_rows():
    """Small-M GEMMs run below peak; long prefills approach the fitted maximum efficiency."""
    model = _model("llama-8b")
    hw = model.dep.hardware

    def achieved(tokens: int) -> float:
        b = model.breakdown(StepBatch.from_items([(tokens, 0)]))
        i = b.names.index("gate_up_proj")
        return float(b.flops[i, 0] / b.compute_s[i, 0]) / hw.peak("bf16")

    assert achieved(64) < achieved(512) < achieved(8192) <= 1.0
    assert not math.isclose(achieved(64), achieved(8192), rel_tol=0.05)


def test_batch_inputs_are_validated():
    with pytest.raises(InfercastError) as err:
        StepBatch.from_items([(0, 5)])
    assert err.value.field == "batch"
    with pytest.raises(InfercastError):
        StepBatch.from_items(decode=[-3])


def test_step_time_convenience_reuses_the_cached_cost_model(monkeypatch):
    """``cost.step.step_time`` prices through ``cost_model``: one StepCostModel per deployment and profile, not
    one per call, and the same seconds as that model."""
    from infercast.cost import step

    dep = _dep("mixtral-tp2-ep2")
    batch = StepBatch.uniform(prefill_seqs=2, chunk=300, decode_seqs=np.arange(1, 9), context=1500)
    expected = step.cost_model(dep).step_time(batch)
    built = []
    monkeypatch.setattr(step, "StepCostModel", lambda *a: built.append(a) or StepCostModel(*a))
    for _ in range(3):
        np.testing.assert_array_equal(step.step_time(batch, dep), expected)
    assert built == []  # every call answered by the cached model


# ----- profiles ------------------------------------------------------------------------------------------------
def test_engine_graph_memory_matches_graph_replay():
    """An engine reserves CUDA-graph memory exactly when its cost profile replays steps as graphs."""
    from infercast.cost.profile import load_profile
    from infercast.specs.engine import engine_catalog

    for engine in engine_catalog().values():
        if engine.id == "ideal":
            continue
        profile = load_profile("h100-sxm", "hopper", engine.id)
        assert (engine.cuda_graph_bytes > 0) == (profile.graph_max_tokens > 0), engine.id


def test_a_gpu_named_like_a_profile_file_gets_priors():
    """profiles/defaults.yaml and engine_load.yaml are not GPU profiles, whatever a user GPU is called."""
    from infercast.cost.profile import load_profile

    for name in ("defaults", "engine_load"):
        profile = load_profile(name, "hopper", "vllm-0.6")
        assert profile.hbm_efficiency == load_profile(name, "hopper", "vllm-0.6", fitted=False).hbm_efficiency
        assert not any(v.startswith("fitted: ") for v in profile.provenance.values())


def test_gated_deltanet_prefill_runs_a_sequences_chunks_in_series():
    """A lone 8k prompt's gated-DeltaNet layers take at least 128 chunks x the measured time per chunk, whatever
    their FLOPs; two 4k prompts side by side take half the chunks in series, not the sum."""
    model = _model("qwen3.5-tp4-b200", engine="sglang")
    per_chunk = model.profile.gdn_chunk_s
    if not per_chunk:
        pytest.skip("no measured gated-DeltaNet kernel in the installed b200 profile")
    i = model.names.index("linear_attention_prefill")
    layers = model.dep.model.num_linear_layers
    lone, pair = StepBatch.from_items([(8192, 0)], []), StepBatch.from_items([(4096, 0), (4096, 0)], [])
    lone_s = model.breakdown(lone).memory_s[i, 0]
    assert lone_s == pytest.approx(layers * 128 * per_chunk, rel=1e-9)
    assert model.breakdown(pair).memory_s[i, 0] == pytest.approx(lone_s / 2, rel=1e-9)


def test_mla_latents_add_their_rmsnorm_kernels():
    """MLA runs an RMSNorm on each latent (q and kv) in every layer, beside the two residual-add + RMSNorms."""
    from infercast.cost.operators import build_op_table

    def norm_kernels(model: str, engine: str = "vllm") -> float:
        table = build_op_table(Deployment.resolve(model, "h100-sxm", tp=8, engine=engine))
        return next(r.kernels for r in table.rows if r.name == "norms")

    assert norm_kernels("deepseek-v3") == 61 * 2 + 1 + 61 * 2
    assert norm_kernels("qwen3-32b") == norm_kernels("qwen3-32b", "trtllm") == 64 * 2 + 1
    assert norm_kernels("llama-3.1-70b") == 80 * 2 + 1


def test_narrow_expert_shards_lower_the_fused_moe_ceiling():
    """A fused-MoE fit with ``moe_width_half`` prices experts split tensor-parallel (few columns per rank) below the
    same experts whole on each rank (expert parallel); without it the two ceilings are equal."""
    from infercast.cost.profile import load_profile

    base = load_profile("b200", "blackwell", "vllm")
    with_width = replace(base, moe_width_half={**base.moe_width_half, "fp4": 200.0})
    without = replace(base, moe_width_half={})

    def ceiling(profile, ep: int) -> float:
        dep = Deployment.resolve("deepseek-r1", "b200", tp=8, ep=ep, precision="nvfp4")
        m = StepCostModel(dep, profile)
        return float(1.0 / m.inv_peak_eff[m.names.index("experts_gate_up"), 0])

    # DeepSeek-R1's 2,048 expert columns: 256 per rank split 8 ways, all 2,048 under EP 8
    narrow, whole = 256 / (256 + 200), 2048 / (2048 + 200)
    assert ceiling(with_width, 1) / ceiling(with_width, 8) == pytest.approx(narrow / whole)
    assert ceiling(without, 1) == ceiling(without, 8)
