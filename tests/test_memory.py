"""Memory budget: hand-checked numbers and properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infercast import memory_budget
from infercast.errors import DoesNotFitError, InfercastError
from infercast.memory import require_fit
from infercast.specs.catalog import get_model


def test_llama_70b_fp8_tp2_by_hand():
    b = memory_budget("llama-3.1-70b", "h100-sxm", tp=2, precision="fp8", context=8192)
    m = get_model("llama-3.1-70b")
    linear = m.dense_linear_params  # fp8: 1 byte each, split over 2 GPUs
    embed = 2 * m.vocab_size * m.hidden_size * 2  # untied embedding + LM head stay bf16
    norms = m.norm_params * 2
    assert b.weights_bytes == pytest.approx((linear + embed) / 2 + norms, rel=1e-9)
    assert b.kv_bytes_per_token == 80 * 8 * 128 * 2 * 2 / 2
    # vLLM policy: 0.9 x the memory CUDA exposes (81106 MiB of the 80 GiB: deviceQuery on an H100 80GB HBM3)
    # - weights - activations - runtime, whole 16-token blocks
    assert b.capacity_bytes == 85045477376 < 80 * 2**30
    pool = 0.9 * 85045477376 - b.weights_bytes - b.activation_bytes - b.runtime_overhead_bytes
    assert b.num_blocks == int(pool // (16 * b.kv_bytes_per_token))
    assert b.max_concurrency(8192) == b.num_blocks // 512
    assert b.fits and b.kv_cache_bytes == 512 * 16 * b.kv_bytes_per_token


def test_does_not_fit_says_why():
    b = memory_budget("llama-3.1-70b", "h100-sxm", precision="bf16")
    assert not b.fits and b.shortfall_bytes > 50e9
    with pytest.raises(DoesNotFitError, match="raise `tp`"):
        require_fit(b)
    ok = memory_budget("llama-3.1-8b", "h100-sxm", context=100_000, concurrency=100)
    assert ok.weights_fit and not ok.fits
    with pytest.raises(DoesNotFitError, match="at most"):
        require_fit(ok)


def test_trtllm_takes_fraction_of_free_memory():
    v = memory_budget("llama-3.1-8b", "h100-sxm", engine="vllm")
    t = memory_budget("llama-3.1-8b", "h100-sxm", engine="trtllm")
    free = t.capacity_bytes - t.weights_bytes - t.activation_bytes - t.runtime_overhead_bytes
    assert t.kv_pool_bytes == pytest.approx(0.9 * free, abs=t.block_bytes)
    assert t.kv_pool_bytes > v.kv_pool_bytes


def test_ideal_engine_uses_everything():
    b = memory_budget("llama-3.1-8b", "h100-sxm", engine="ideal")
    assert b.kv_pool_bytes == pytest.approx(b.capacity_bytes - b.weights_bytes, abs=b.block_bytes)


def test_quantized_weights_include_scales():
    bf16 = memory_budget("llama-3.1-8b", "h100-sxm", precision="bf16").weights_breakdown
    int4 = memory_budget("llama-3.1-8b", "h100-sxm", precision="int4").weights_breakdown
    assert int4["ffn"] == pytest.approx(bf16["ffn"] / 2 * (4 + 20 / 128) / 8, rel=1e-9)
    assert int4["embedding"] == bf16["embedding"]  # embeddings stay 16-bit


def test_mxfp4_moe_keeps_attention_bf16():
    b = memory_budget("gpt-oss-120b", "h100-sxm")  # default precision: the release format
    assert b.precision == "mxfp4-moe"
    m = get_model("gpt-oss-120b")
    assert b.weights_breakdown["moe"] == pytest.approx(
        m.routed_expert_params * 4.25 / 8 + m.num_moe_layers * m.router_params_per_layer * 2, rel=1e-3
    )
    assert 60e9 < b.weights_bytes < 66e9  # ~61 GiB as released


def test_bad_inputs():
    for kwargs, field in (
        ({"tp": 0}, "tp"),
        ({"tp": 3}, "tp"),
        ({"context": -1}, "context"),
        ({"concurrency": 1.5}, "concurrency"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"precision": "fp8", "gpu": "a100-80gb"}, "precision"),
        ({"engine": "tgi"}, "engine"),
    ):
        args = {"gpu": "h100-sxm"} | kwargs
        with pytest.raises(InfercastError) as exc:
            memory_budget("llama-3.1-8b", **args)
        assert exc.value.field == field


MODELS = st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b", "gemma-2-9b", "gpt-oss-20b", "mistral-7b"])


@settings(max_examples=60, deadline=None)
@given(model=MODELS, ctx=st.integers(1, 200_000), extra=st.integers(1, 50_000), conc=st.integers(1, 512))
def test_kv_need_monotone_in_context_and_concurrency(model, ctx, extra, conc):
    limit = get_model(model).max_context  # longer contexts are refused (see test_context_beyond_the_model)
    ctx = min(ctx, limit - 1)
    extra = min(extra, limit - ctx)
    a = memory_budget(model, "h200", context=ctx, concurrency=conc)
    b = memory_budget(model, "h200", context=ctx + extra, concurrency=conc)
    c = memory_budget(model, "h200", context=ctx, concurrency=conc + 1)
    assert a.kv_cache_bytes <= b.kv_cache_bytes
    assert a.kv_cache_bytes < c.kv_cache_bytes
    assert a.max_concurrency(ctx) >= b.max_concurrency(ctx + extra)
    assert a.max_context(conc) >= c.max_context(conc + 1)
    if a.max_concurrency(ctx) >= conc:
        assert a.fits


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(["llama-3.1-70b", "qwen2.5-72b", "qwen3-32b"]), tp=st.sampled_from([1, 2, 4, 8]))
def test_tp_shards_divide_weights_and_kv(model, tp):
    one = memory_budget(model, "b200", tp=1)
    many = memory_budget(model, "b200", tp=tp)
    body = one.weights_bytes - one.weights_breakdown["norms"]
    assert many.weights_bytes - many.weights_breakdown["norms"] == pytest.approx(body / tp, rel=1e-9)
    assert many.kv_bytes_per_token == pytest.approx(one.kv_bytes_per_token / tp)


@settings(max_examples=30, deadline=None)
@given(ctx=st.integers(1, 100_000))
def test_max_context_is_consistent_with_blocks(ctx):
    b = memory_budget("gemma-2-9b", "l40s", precision="int4")
    conc = b.max_concurrency(ctx)
    if conc >= 1:
        assert b.blocks_per_sequence(ctx) * conc <= b.num_blocks
        assert b.blocks_per_sequence(ctx) * (conc + 1) > b.num_blocks
        assert b.max_context(conc) >= min(ctx, 8192)  # capped at gemma-2's 8192-token context


def test_context_beyond_the_model_is_refused():
    limit = get_model("gemma-2-9b").max_context
    assert memory_budget("gemma-2-9b", "h100-sxm", context=limit).context == limit
    with pytest.raises(InfercastError, match=f"{limit}-token context") as exc:
        memory_budget("gemma-2-9b", "h100-sxm", context=limit + 1)
    assert exc.value.field == "context"


def test_t4_defaults_to_fp16_and_memory_follows():
    b = memory_budget("llama-3.2-1b", "t4", context=4096, concurrency=4)
    assert (b.precision, b.kv_precision) == ("fp16", "fp16") and b.fits
    assert b.kv_bytes_per_token == memory_budget("llama-3.2-1b", "h100-sxm").kv_bytes_per_token


def test_norm_weights_use_the_unquantized_dtype():
    from infercast.specs.sharding import norm_elements

    n = norm_elements(get_model("llama-3.1-8b"))
    by_precision = {
        p: memory_budget("llama-3.1-8b", "h100-sxm", precision=p).weights_breakdown["norms"]
        for p in ("fp32", "bf16", "fp16", "fp8", "int4")
    }
    assert by_precision == {"fp32": 4 * n, "bf16": 2 * n, "fp16": 2 * n, "fp8": 2 * n, "int4": 2 * n}


@settings(max_examples=200, deadline=None)
@given(
    ctx=st.integers(1, 300_000),
    block=st.sampled_from([1, 16, 32, 64]),
    window=st.integers(1, 10_000),
    layers=st.integers(1, 128),
    data=st.data(),
)
def test_kv_blocks_are_exact_for_ints_and_arrays(ctx, block, window, layers, data):
    """The block count in layer groups of g = gcd(L − Ls, Ls) layers, full·(L − Ls)/g + window_blocks·Ls/g (whole
    blocks of every layer, full, without windowed layers), computed exactly, whether one context (memory budget)
    or an array of them (sweep) is asked."""
    from fractions import Fraction
    from math import ceil, gcd

    import numpy as np

    from infercast.memory import kv_blocks_per_sequence

    sliding = data.draw(st.integers(0, layers))
    full, win = ceil(Fraction(ctx, block)), ceil(Fraction(min(ctx, window), block))
    group = gcd(layers - sliding, sliding) if sliding else layers
    expected = (full * (layers - sliding) + win * sliding) // group
    assert kv_blocks_per_sequence(ctx, block, window, layers, sliding) == expected
    arr = kv_blocks_per_sequence(np.array([ctx, ctx], dtype=float), block, window, layers, sliding)
    assert arr.tolist() == [expected, expected]


def test_blocks_span_one_layer_group_on_windowed_models():
    """gpt-oss-120b: 18 full + 18 sliding layers, so a KV block holds 18 layers; Llama: every layer."""
    from infercast import memory_budget
    from infercast.specs.deployment import Deployment

    oss = memory_budget(Deployment.resolve("gpt-oss-120b", "h100-sxm"))
    assert oss.layer_groups == (1, 1) and oss.layers_per_block == 18
    llama = memory_budget(Deployment.resolve("llama-3.1-8b", "h100-sxm"))
    assert llama.layer_groups == (1, 0) and llama.layers_per_block == 32
