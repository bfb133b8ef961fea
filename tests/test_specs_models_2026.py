"""2026 models: config.json fixtures load offline into the catalog specs, counts match the cards, KV/state bytes
follow each attention kind (MLA + DSA, gated DeltaNet hybrid, chunked local), and the cost model prices them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from infercast import memory_budget
from infercast.cost.batch import F, StepBatch
from infercast.cost.operators import build_op_table
from infercast.cost.step import StepCostModel
from infercast.errors import InfercastError
from infercast.sim.api import simulate
from infercast.specs.catalog import get_model
from infercast.specs.deployment import Deployment
from infercast.specs.hf_config import load_hf_config
from infercast.specs.truncate import truncated
from tests.cli_helpers import run_json

NEW_MODELS = {
    "deepseek-v3.2": ("h200", 8, None),
    "glm-5": ("h200", 8, "fp8"),
    "kimi-k2.5": ("h200", 8, None),
    "minimax-m2.5": ("h100-sxm", 4, None),
    "qwen3.5-397b-a17b": ("h200", 8, None),
    "llama-4-scout": ("h100-sxm", 4, None),
    "llama-4-maverick": ("h200", 8, None),
    "deepseek-v4-pro": ("h200", 8, None),
    "deepseek-v4-flash": ("h200", 8, None),
}


@pytest.mark.parametrize("model_id", sorted(NEW_MODELS))
def test_fixture_config_loads_into_the_catalog_spec(hf_configs, model_id):
    loaded = load_hf_config(hf_configs / f"{model_id}.json", model_id=model_id)
    ref = get_model(model_id)
    arch = (
        "num_layers",
        "hidden_size",
        "num_attention_heads",
        "num_kv_heads",
        "head_dim",
        "vocab_size",
        "max_context",
        "moe",
        "mla",
        "sparse_attention",
        "linear_attention",
        "compressed_attention",
        "sliding_window",
        "num_sliding_layers",
        "local_attention",
        "attn_output_gate",
        "qk_norm",
        "default_precision",
    )
    for field in arch:
        assert getattr(loaded, field) == getattr(ref, field), field
    assert loaded.total_params == ref.total_params


@pytest.mark.parametrize("model_id", sorted(NEW_MODELS))
def test_counts_within_card_rounding(model_id):
    # The cards state whole billions (17B, 40B, 230B): 2.5 % is that rounding, not slack in the count.
    m = get_model(model_id)
    assert m.total_params == pytest.approx(m.published_params, rel=0.025)
    assert m.published_convention_active_params == pytest.approx(m.published_active_params, rel=0.025)


def test_dsa_kv_holds_latent_and_indexer_keys():
    m = get_model("deepseek-v3.2")
    assert m.attention_kind == "MLA + DSA"
    # per layer: 576-value latent in the KV format + 128 fp8 indexer values + one fp32 scale
    assert m.kv_bytes_per_token(2) == 61 * (576 * 2 + 128 + 4)
    assert m.kv_bytes_per_token(1, tp=8) == 61 * (576 + 132)  # latent and indexer replicated on every rank
    # memory keeps every token (the top-k selection only limits what attention reads)
    assert m.kv_bytes_for_context(100_000, 1) == 100_000 * m.kv_bytes_per_token(1)
    assert m.attention_window == 2048 and m.num_window_read_layers == 61 and m.num_sliding_layers == 0
    glm = get_model("glm-5")
    assert glm.kv_bytes_per_token(2) == 78 * (576 * 2 + 132)


def test_gated_deltanet_state_and_kv():
    m = get_model("qwen3.5-397b-a17b")
    la = m.linear_attention
    assert (m.num_linear_layers, m.num_attention_layers) == (45, 15)
    # only the 15 full-attention layers cache K/V: 2 x 2 KV heads x 256 dims
    assert m.kv_bytes_per_token(2) == 15 * 2 * 2 * 256 * 2
    state = 64 * 128 * 128 + 3 * (2 * 16 * 128 + 64 * 128)  # recurrent state + conv window, per layer
    assert la.state_elements_per_rank(1) == state
    assert m.state_bytes_per_sequence(2) == 45 * state * 2
    assert m.state_bytes_per_sequence(2, tp=8) == pytest.approx(45 * state * 2 / 8)
    with pytest.raises(InfercastError, match="linear-attention"):
        m.check_parallelism(32)


def test_chunked_local_layers_hold_one_chunk():
    m = get_model("llama-4-scout")
    assert m.local_attention == "chunked" and m.sliding_window == 8192 and m.num_sliding_layers == 36
    per_layer = 2 * 8 * 128 * 2
    assert m.kv_bytes_for_context(20_000, 2) == (12 * 20_000 + 36 * 8192) * per_layer
    maverick = get_model("llama-4-maverick")
    assert maverick.num_moe_layers == 24 and maverick.intermediate_size == 16384  # dense FFNs interleaved


def test_kimi_int4_experts_bf16_rest():
    m = get_model("kimi-k2.5")
    assert m.default_precision == "int4-moe"
    b = memory_budget("kimi-k2.5", "h200", tp=8)
    experts = m.routed_expert_params * (4 + 16 / 32) / 8 / 8  # INT4 + one bf16 scale per 32, over 8 GPUs
    assert b.weights_breakdown["moe"] == pytest.approx(
        experts + m.num_moe_layers * (m.router_params_per_layer + m.shared_expert_params_per_layer / 8) * 2, rel=1e-3
    )


def test_linear_state_takes_pool_blocks():
    b = memory_budget("qwen3.5-397b-a17b", "h200", tp=8, context=8192)
    m = get_model("qwen3.5-397b-a17b")
    assert b.state_bytes_per_sequence == pytest.approx(m.state_bytes_per_sequence(2, 8))
    assert b.state_blocks_per_sequence == int(np.ceil(b.state_bytes_per_sequence / b.block_bytes)) > 0
    assert b.blocks_per_sequence(8192) == 8192 // b.block_size + b.state_blocks_per_sequence
    assert b.max_concurrency(8192) == b.num_blocks // b.blocks_per_sequence(8192)
    assert b.max_context(b.max_concurrency(8192)) >= 8192


def _rows(model_id, gpu, tp, precision=None):
    table = build_op_table(Deployment.resolve(model_id, gpu, tp=tp, precision=precision))
    return {r.name: r for r in table.rows}


def test_dsa_rows_read_top_k_and_index_everything():
    rows = _rows("deepseek-v3.2", "h200", 8)
    dec = rows["attention_decode"]
    assert dec.bytes[F["decode_kv"]] == 0 and dec.bytes[F["decode_kv_win"]] > 0  # main attention: top-k only
    idx = rows["dsa_indexer_decode"]
    assert idx.bytes[F["decode_kv"]] == 61 * (132 + 8)  # every cached key (fp8 + scale), its fp32 score in/out
    assert idx.flops[F["decode_kv"]] == 61 * (2 * 64 * 128 + 2 * 64)
    assert idx.compute_key == "fp8"
    assert "dsa_indexer_prefill" in rows and "linear_attention_decode" not in rows


def test_linear_rows_do_not_grow_with_context():
    rows = _rows("qwen3.5-397b-a17b", "h200", 8)
    dec = rows["linear_attention_decode"]
    assert dec.bytes[F["decode_kv"]] == 0 and dec.flops[F["decode_kv"]] == 0
    m = get_model("qwen3.5-397b-a17b")
    assert dec.bytes[F["decode_tokens"]] == pytest.approx(
        45 * ((2 * 2048 + 3 * 8192) / 8 * 2 + 2 * m.state_bytes_per_sequence(2, 8) / 45)
    )
    assert rows["attention_decode"].kernels == 15  # softmax attention only on the full-attention layers


def test_sparse_decode_step_grows_slower_than_dense_mla():
    # at long context DeepSeek-V3.2's decode step (top-2048 attention + indexer) beats V3's full MLA reads
    def step(model_id, ctx):
        dep = Deployment.resolve(model_id, "h200", tp=8)
        batch = StepBatch.uniform(decode_seqs=32, context=ctx, window=dep.model.attention_window)
        return float(StepCostModel(dep).step_time(batch)[0])

    # (at short context the indexer's extra kernels, each with its measured fixed time, cost V3.2 up to ~20 %)
    assert step("deepseek-v3.2", 2048) == pytest.approx(step("deepseek-v3", 2048), rel=0.2)
    assert step("deepseek-v3.2", 131072) < 0.7 * step("deepseek-v3", 131072)


def test_bad_linear_attention_config_is_one_line(tmp_path, hf_configs):
    cfg = json.loads((hf_configs / "qwen3.5-397b-a17b.json").read_text())
    del cfg["text_config"]["linear_num_value_heads"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(InfercastError, match="linear_num_value_heads"):
        load_hf_config(path)


@pytest.mark.parametrize("model_id", sorted(NEW_MODELS))
def test_predict_runs(capsys, model_id):
    gpu, tp, precision = NEW_MODELS[model_id]
    extra = ("--precision", precision) if precision else ()
    out = run_json(capsys, "predict", "--model", model_id, "--gpu", gpu, "--tp", str(tp), *extra)
    text = json.dumps(out)
    assert '"fits": true' in text


@pytest.mark.parametrize("model_id", ["deepseek-v3.2", "qwen3.5-397b-a17b", "llama-4-scout"])
def test_simulate_runs(capsys, model_id):
    gpu, tp, _ = NEW_MODELS[model_id]
    out = run_json(
        capsys,
        "simulate",
        "--model",
        model_id,
        "--gpu",
        gpu,
        "--tp",
        str(tp),
        "--input-len",
        "1024",
        "--output-len",
        "64",
        "--concurrency",
        "4",
        "--num-requests",
        "12",
    )
    assert out["completed"] == 12 and out["output_throughput_tok_s"] > 0


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_simulator_takes_linear_state_from_the_kv_pool(preemption):
    # a small pool: each sequence needs its token blocks plus its fixed state blocks; all are freed at the end
    b = memory_budget("qwen3.5-397b-a17b", "h200", tp=8, gpu_memory_utilization=0.69, max_num_seqs=512)
    per_seq = -(-(256 + 32) // b.block_size) + b.state_blocks_per_sequence
    res = simulate(
        "qwen3.5-397b-a17b",
        "h200",
        tp=8,
        input_len=256,
        output_len=32,
        num_requests=200,
        concurrency=200,
        gpu_memory_utilization=0.69,
        max_num_seqs=512,
        preemption=preemption,
    )
    assert res.config["kv_blocks_per_replica"] == b.num_blocks
    assert res["completed"] == 200
    assert res["mean_decode_batch"] <= b.num_blocks // per_seq
    ledger = res.replicas[0].blocks
    assert ledger.kv.used == 0 and not ledger.state_holders


def test_truncated_hybrid_keeps_its_layer_mix():
    m = get_model("qwen3.5-397b-a17b")
    cut = truncated(m, 8)
    assert (cut.num_linear_layers, cut.num_attention_layers) == (6, 2)
    with pytest.raises(InfercastError, match="take at least 4"):
        truncated(m, 3)


def test_torch_harness_refuses_attention_it_does_not_implement():
    torch_model = pytest.importorskip("infercast.harness.torch_model")
    with pytest.raises(InfercastError, match="linear attention"):
        torch_model.TransformerModel(get_model("qwen3.5-397b-a17b"), num_layers=4)
