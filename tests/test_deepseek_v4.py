"""DeepSeek-V4 (Pro, Flash): the config.json fixtures load into the catalog specs, counts match the card, KV bytes
follow the window + compressed entries per layer (memory and simulator agree), and predict/simulate price them."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from infercast import memory_budget
from infercast.cost.batch import NUM_FEATURES, StepBatch
from infercast.cost.operators import build_op_table
from infercast.errors import InfercastError
from infercast.sim.api import simulate
from infercast.sim.blocks import replica_pool
from infercast.specs.catalog import get_model
from infercast.specs.deployment import Deployment
from infercast.specs.hf_config import load_hf_config
from infercast.specs.sharding import norm_elements, rank_linears
from infercast.specs.truncate import truncated
from tests.cli_helpers import run, run_json

V4 = ("deepseek-v4-pro", "deepseek-v4-flash")
# (layers, CSA layers, HCA layers, window-only layers): compress_ratios of the released configs, MTP entry dropped
LAYER_MIX = {"deepseek-v4-pro": (61, 30, 31, 0), "deepseek-v4-flash": (43, 21, 20, 2)}


@pytest.mark.parametrize("model_id", V4)
def test_importer_reads_the_release_config(hf_configs, model_id):
    loaded = load_hf_config(hf_configs / f"{model_id}.json", model_id=model_id)
    ref = get_model(model_id)
    assert loaded.compressed_attention == ref.compressed_attention
    assert loaded.moe == ref.moe and loaded.total_params == ref.total_params
    assert loaded.default_precision == "mxfp4-moe"  # expert_dtype fp4 (the FP8 rest priced as 16-bit)
    assert (loaded.num_kv_heads, loaded.head_dim, loaded.mla, loaded.num_sliding_layers) == (1, 512, None, 0)
    ca = loaded.compressed_attention
    layers, csa, hca, window_only = LAYER_MIX[model_id]
    assert (len(ca.compress_ratios), ca.csa_layers, len(ca.hca_ratios)) == (layers, csa, hca)
    assert ca.compress_ratios.count(0) == window_only
    assert loaded.attention_kind == "MQA + compressed (sliding window, CSA/HCA)"


@pytest.mark.parametrize("model_id", V4)
def test_counts_match_the_card_and_the_rank_weights(model_id):
    m = get_model(model_id)
    # the card: 1.6T / 49B (Pro), 284B / 13B (Flash); the counts are computed from the architecture
    assert m.total_params == pytest.approx(m.published_params, rel=0.02)
    assert m.active_params_excluding_embedding == pytest.approx(m.published_active_params, rel=0.025)
    # what one rank stores at tp=1 is every parameter (memory and counts share the layer list)
    assert sum(lin.elements for lin in rank_linears(m)) + norm_elements(m) == m.total_params


def test_kv_bytes_hand_computed():
    pro, flash = get_model("deepseek-v4-pro"), get_model("deepseek-v4-flash")
    # Pro, fp8 entries of 512 B; CSA layers add an fp8 indexer key + fp32 scale (132 B) per compressed entry
    assert pro.kv_bytes_for_context(8192, 1) == 61 * 128 * 512 + 30 * 2048 * (512 + 132) + 31 * 64 * 512
    assert pro.kv_bytes_for_context(100, 1) == 61 * 100 * 512 + 30 * 25 * 644 + 31 * 1 * 512  # ceil(100/128) = 1
    assert pro.kv_bytes_for_context(131072, 1) == 61 * 128 * 512 + 30 * 32768 * 644 + 31 * 1024 * 512
    # Flash, bf16 entries of 1024 B, 2 window-only layers
    assert flash.kv_bytes_for_context(131072, 2) == 43 * 128 * 1024 + 21 * 32768 * 1156 + 20 * 1024 * 1024
    assert pro.kv_bytes_per_token(1) == 30 * 644 / 4 + 31 * 512 / 128  # long-run growth
    # against DeepSeek-V3's MLA latent (576 values per token and layer): ~7x less at 128k
    v3 = get_model("deepseek-v3")
    assert v3.kv_bytes_for_context(131072, 1) > 7 * pro.kv_bytes_for_context(131072, 1)
    assert v3.kv_bytes_for_context(8192, 1) > 6 * pro.kv_bytes_for_context(8192, 1)


@pytest.mark.parametrize("model_id", V4)
def test_pool_blocks_bound_the_exact_bytes_and_the_simulator_uses_them(model_id):
    m = get_model(model_id)
    mem = memory_budget(model_id, "h200", tp=8)
    assert mem.state_blocks_per_sequence > 0 and mem.kv_window is None
    for ctx in (1, 100, 128, 129, 4096, 8193, 131072, 1_000_000):
        held = mem.blocks_per_sequence(ctx) * mem.block_bytes
        exact = m.kv_bytes_for_context(ctx, 2) + m.compressed_attention.state_bytes_per_sequence(m.head_dim)
        assert exact <= held <= exact + m.fixed_kv_bytes_per_sequence(2) + 2 * mem.block_bytes
    rule, blocks, block_bytes, state = replica_pool(mem, prefix_cache=False)
    assert (blocks, block_bytes, state) == (mem.num_blocks, mem.block_bytes, mem.state_blocks_per_sequence)
    assert rule.count(8192) + state == mem.blocks_per_sequence(8192)


@pytest.mark.parametrize(
    ("model_id", "gpu", "layout"),
    [
        ("deepseek-v4-pro", "h200", ("--tp", "8")),
        ("deepseek-v4-flash", "h200", ("--tp", "8")),
        ("deepseek-v4-pro", "b200", ("--tp", "1", "--attention-dp", "8", "--ep", "8")),
        ("deepseek-v4-flash", "b200", ("--tp", "8", "--precision", "fp8")),
    ],
)
def test_predict_runs(capsys, model_id, gpu, layout):
    out = run_json(capsys, "predict", "--model", model_id, "--gpu", gpu, *layout, "--input-len", "8192")
    assert out["memory"]["fits"]
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert math.isfinite(out[key]) and out[key] > 0, key


@pytest.mark.parametrize("model_id", V4)
def test_simulate_runs(model_id):
    res = simulate(model_id, "h200", tp=8, input_len=2048, output_len=32, num_requests=12, concurrency=4)
    assert res["completed"] == 12 and math.isfinite(res["output_throughput_tok_s"])
    assert res["output_throughput_tok_s"] > 0
    ledger = res.replicas[0].blocks
    assert ledger.kv.used == 0
    assert ledger.state_blocks == memory_budget(model_id, "h200", tp=8).state_blocks_per_sequence


def _attention_decode_bytes(model_id: str, context: int) -> float:
    """Bytes the attention kernels (main attention and indexer) read for one decode token at ``context``."""
    dep = Deployment.resolve(model_id, "h200", tp=8, kv_precision="fp8")
    x = StepBatch.uniform(decode_seqs=1, context=context, window=dep.model.attention_window).x[:, 0]
    rows = [r for r in build_op_table(dep).rows if r.kind == "attention"]
    return sum(float(r.bytes[:NUM_FEATURES] @ x) for r in rows)


def test_long_context_decode_reads_far_less_than_mla():
    v3, pro = _attention_decode_bytes("deepseek-v3", 131072), _attention_decode_bytes("deepseek-v4-pro", 131072)
    assert pro < 0.15 * v3
    # the CSA reads stop growing at 4 x top-k tokens; the indexer (every 4th token's key) and HCA reads still grow
    short = _attention_decode_bytes("deepseek-v4-pro", 8192)
    assert _attention_decode_bytes("deepseek-v4-pro", 1_000_000) < 0.5 * (1_000_000 / 8192) * short
    # and the rows exist with their names
    names = {r.name for r in build_op_table(Deployment.resolve("deepseek-v4-flash", "h200", tp=8)).rows}
    assert {"attention_decode", "csa_indexer_decode", "kv_compressor", "hyper_connections", "o_a_proj"} <= names


def test_decode_step_time_is_finite_and_grows_with_context():
    from infercast.cost.step import StepCostModel

    dep = Deployment.resolve("deepseek-v4-flash", "h200", tp=8)
    model = StepCostModel(dep)
    ctx = np.array([1024.0, 65536.0, 1_000_000.0])
    t = model.step_time(StepBatch.uniform(decode_seqs=32, context=ctx, window=dep.model.attention_window))
    assert np.all(np.isfinite(t)) and np.all(np.diff(t) > 0)


def _write(tmp_path, cfg: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda c: c.update(compress_ratios=c["compress_ratios"][:10]), "compress_ratios"),
        (lambda c: c["compress_ratios"].__setitem__(3, -4), "compress_ratios"),
        (lambda c: c["compress_ratios"].__setitem__(3, "4"), "compress_ratios"),
        (lambda c: c.pop("o_groups"), "o_groups"),
        (lambda c: c.update(o_groups=7), "o_groups"),
        (lambda c: c.update(sliding_window=0), "window"),
        (lambda c: c.update(index_topk=-1), "index_topk"),
        (lambda c: c.update(num_key_value_heads=2), "num_kv_heads"),
    ],
)
def test_bad_config_fields_give_one_line_errors(tmp_path, hf_configs, change, field):
    cfg = json.loads((hf_configs / "deepseek-v4-flash.json").read_text())
    change(cfg)
    with pytest.raises(InfercastError, match=field) as exc:
        load_hf_config(_write(tmp_path, cfg))
    assert "\n" not in str(exc.value)


def test_tp_must_divide_the_output_groups(capsys):
    code, _, err = run(capsys, "predict", "--model", "deepseek-v4-flash", "--gpu", "h200", "--tp", "16", "--json")
    assert code != 0 and "output-projection groups" in err + _


def test_truncated_keeps_the_first_layers_ratios_and_summary_says_what_is_approximated():
    m = get_model("deepseek-v4-flash")
    cut = truncated(m, 4)
    assert cut.compressed_attention.compress_ratios == (0, 0, 4, 128)
    summary = m.summary()
    assert "21 CSA layers" in summary["compressed_attention"] and "contiguous" in summary["approximations"]
