"""Model specs: computed parameter counts, KV-cache sizes, HF config loading."""

from __future__ import annotations

import json

import pytest

from infercast.errors import InfercastError
from infercast.specs.catalog import get_model, model_catalog
from infercast.specs.hf_config import load_hf_config

REQUIRED = [
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "llama-3.2-1b",
    "llama-3.2-3b",
    "llama-3.3-70b",
    "mistral-7b",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "qwen2.5-7b",
    "qwen2.5-72b",
    "qwen3-0.6b",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "deepseek-v3",
    "deepseek-r1",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "gemma-2-9b",
    "phi-3-mini",
]


def test_catalog_has_required_ids_with_sources():
    cat = model_catalog()
    assert set(REQUIRED) <= set(cat)
    for m in cat.values():
        assert m.source.startswith(("http", "huggingface")), m.id
        assert m.published_params, m.id


@pytest.mark.parametrize("model_id", REQUIRED)
def test_parameter_counts_within_two_percent_of_published(model_id):
    m = get_model(model_id)
    assert m.total_params == pytest.approx(m.published_params, rel=0.02)
    if m.published_active_params:
        active = m.active_params_excluding_embedding if m.published_active_excludes_embedding else m.active_params
        assert active == pytest.approx(m.published_active_params, rel=0.02)


def test_exact_counts_of_known_checkpoints():
    # Safetensors totals of the released checkpoints.
    assert get_model("llama-2-7b").total_params == 6_738_415_616
    assert get_model("llama-3.1-8b").total_params == 8_030_261_248
    assert get_model("mixtral-8x7b").total_params == 46_702_792_704


def test_kv_bytes_per_token_gqa_llama3():
    m = get_model("llama-3.1-70b")
    # 2 (K and V) x 80 layers x 8 KV heads x 128 dims x 2 bytes
    assert m.kv_bytes_per_token(2) == 2 * 80 * 8 * 128 * 2 == 327_680
    assert m.kv_bytes_per_token(1) == 163_840  # fp8 KV
    assert m.kv_bytes_per_token(2, tp=2) == 163_840  # heads split across 2 GPUs
    assert m.kv_bytes_per_token(2, tp=16) == 2 * 80 * 1 * 128 * 2  # 8 heads replicated over 16 GPUs


def test_kv_bytes_per_token_mla_deepseek():
    m = get_model("deepseek-v3")
    # one latent of kv_lora_rank 512 + rope dim 64 = 576 values per layer per token, 61 layers
    assert m.kv_elements_per_token_per_layer == 576
    assert m.kv_bytes_per_token(2) == 61 * 576 * 2
    assert m.kv_bytes_per_token(2, tp=8) == 61 * 576 * 2  # latent replicated on every rank
    assert m.attention_kind == "MLA"


def test_mla_down_projections_are_one_gemm():
    """q_a and kv_a read the same hidden state: every engine runs them as one GEMM (its columns both widths)."""
    from infercast.specs.sharding import rank_linears

    m = get_model("deepseek-v3")
    linears = {lin.name: lin for lin in rank_linears(m, tp=8)}
    assert "q_a_proj" not in linears and "kv_a_proj" not in linears
    fused = linears["qkv_a_proj"]
    assert (fused.k, fused.n) == (7168, 1536 + 512 + 64) and fused.replicated


def test_kv_bytes_sliding_window_gpt_oss():
    m = get_model("gpt-oss-120b")
    per_layer_tok = 2 * 8 * 64 * 2  # K,V x 8 KV heads x 64 dims x bf16
    assert m.kv_bytes_per_token(2) == 36 * per_layer_tok
    assert m.sliding_window == 128 and m.num_sliding_layers == 18
    # beyond the 128-token window only the 18 full-attention layers keep growing
    assert m.kv_bytes_for_context(100, 2) == 36 * 100 * per_layer_tok
    assert m.kv_bytes_for_context(10_000, 2) == (18 * 10_000 + 18 * 128) * per_layer_tok
    assert m.attention_sinks  # learned sink logits: no extra KV entries


def test_gqa_cache_smaller_than_mha_equivalent():
    m = get_model("llama-3-8b")
    mha = m.model_copy(update={"num_kv_heads": m.num_attention_heads})
    assert m.kv_bytes_per_token(2) * 4 == mha.kv_bytes_per_token(2)


FIXTURE_TO_CATALOG = {
    "llama-3.1-8b.json": "llama-3.1-8b",
    "mistral-7b.json": "mistral-7b",
    "mixtral-8x7b.json": "mixtral-8x7b",
    "qwen2.5-7b.json": "qwen2.5-7b",
    "qwen3-8b.json": "qwen3-8b",
    "qwen3-30b-a3b.json": "qwen3-30b-a3b",
    "deepseek-v3.json": "deepseek-v3",
    "gemma-2-9b.json": "gemma-2-9b",
    "gpt-oss-20b.json": "gpt-oss-20b",
    "phi-3-mini.json": "phi-3-mini",
}


@pytest.mark.parametrize("fname,model_id", sorted(FIXTURE_TO_CATALOG.items()))
def test_hf_config_matches_catalog(hf_configs, fname, model_id):
    loaded = load_hf_config(hf_configs / fname)
    ref = get_model(model_id)
    assert loaded.total_params == ref.total_params
    assert loaded.active_params == ref.active_params
    assert loaded.kv_bytes_per_token(2) == ref.kv_bytes_per_token(2)
    assert loaded.sliding_window == ref.sliding_window
    assert loaded.num_sliding_layers == ref.num_sliding_layers


def test_get_model_accepts_path(hf_configs):
    m = get_model(str(hf_configs / "qwen3-8b.json"))
    assert m.num_layers == 36 and m.qk_norm


def test_quantized_config_sets_default_precision(hf_configs):
    assert load_hf_config(hf_configs / "gpt-oss-20b.json").default_precision == "mxfp4-moe"
    assert load_hf_config(hf_configs / "deepseek-v3.json").default_precision == "fp8"


def test_malformed_configs_give_field_errors(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(InfercastError, match="not valid JSON"):
        load_hf_config(bad)
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))
    with pytest.raises(InfercastError, match="num_hidden_layers"):
        load_hf_config(tmp_path)
    bad.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 4096,
                "num_hidden_layers": -2,
                "num_attention_heads": 32,
                "vocab_size": 32000,
                "intermediate_size": 11008,
            }
        )
    )
    with pytest.raises(InfercastError, match="non-negative integer"):
        load_hf_config(bad)
    bad.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 4096,
                "num_hidden_layers": 2,
                "num_attention_heads": 32,
                "num_key_value_heads": 5,
                "vocab_size": 32000,
                "intermediate_size": 11008,
                "max_position_embeddings": 4096,
            }
        )
    )
    with pytest.raises(InfercastError, match="multiple"):
        load_hf_config(bad)
    with pytest.raises(InfercastError, match="no such file"):
        load_hf_config(tmp_path / "missing" / "config.json")


def _llama_config(hf_configs, **changes) -> dict:
    raw = json.loads((hf_configs / "llama-3.1-8b.json").read_text())
    raw.update(changes)
    return raw


def _load(tmp_path, raw: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return load_hf_config(path)


def test_missing_context_length_is_an_error_not_4096(hf_configs, tmp_path):
    raw = _llama_config(hf_configs)
    assert _load(tmp_path, raw).max_context == 131072
    del raw["max_position_embeddings"]
    with pytest.raises(InfercastError, match="max_position_embeddings") as exc:
        _load(tmp_path, raw)
    assert exc.value.field == "model"
    raw["n_positions"] = 2048  # GPT-2 style name is read too
    assert _load(tmp_path, raw).max_context == 2048


def _ct_group(w_type: str, w_bits: int, a_bits: int | None) -> dict:
    acts = {"num_bits": a_bits, "type": w_type, "strategy": "token", "dynamic": True} if a_bits else None
    return {
        "targets": ["Linear"],
        "weights": {"num_bits": w_bits, "type": w_type, "strategy": "group" if w_bits == 4 else "channel"},
        "input_activations": acts,
    }


@pytest.mark.parametrize(
    ("group", "precision"),
    [
        (("float", 8, 8), "fp8"),  # e.g. RedHatAI/...-FP8-dynamic
        (("int", 8, 8), "int8"),  # W8A8 INT8 (SmoothQuant/GPTQ via llm-compressor)
        (("int", 8, None), "w8a16"),
        (("int", 4, None), "int4"),  # W4A16, e.g. RedHatAI/...-quantized.w4a16
        (("float", 4, 4), "nvfp4"),
    ],
)
def test_compressed_tensors_maps_config_groups_to_the_scheme(hf_configs, tmp_path, group, precision):
    quant = {"quant_method": "compressed-tensors", "config_groups": {"group_0": _ct_group(*group)}}
    spec = _load(tmp_path, _llama_config(hf_configs, quantization_config=quant))
    assert spec.default_precision == precision


def test_compressed_tensors_without_a_matching_scheme_is_an_error(hf_configs, tmp_path):
    w4a8 = {"quant_method": "compressed-tensors", "config_groups": {"group_0": _ct_group("int", 4, 8)}}
    with pytest.raises(InfercastError, match="int4 weights, 8-bit activations") as exc:
        _load(tmp_path, _llama_config(hf_configs, quantization_config=w4a8))
    assert exc.value.field == "model"
    mixed = {
        "quant_method": "compressed-tensors",
        "config_groups": {"a": _ct_group("float", 8, 8), "b": _ct_group("int", 4, None)},
    }
    with pytest.raises(InfercastError, match="mix schemes"):
        _load(tmp_path, _llama_config(hf_configs, quantization_config=mixed))
    with pytest.raises(InfercastError, match="config_groups"):
        _load(tmp_path, _llama_config(hf_configs, quantization_config={"quant_method": "compressed-tensors"}))


def test_other_quantization_methods(hf_configs, tmp_path):
    def precision(quant: dict) -> str:
        return _load(tmp_path, _llama_config(hf_configs, quantization_config=quant)).default_precision

    assert precision({"quant_method": "gptq", "bits": 4, "group_size": 128}) == "int4"
    assert precision({"quant_method": "gptq", "bits": 8}) == "w8a16"
    assert precision({"quant_method": "awq", "bits": 4}) == "int4"
    assert precision({"quant_method": "modelopt", "quant_algo": "NVFP4"}) == "nvfp4"
    with pytest.raises(InfercastError, match="bitsandbytes"):
        precision({"quant_method": "bitsandbytes", "load_in_4bit": True})
    with pytest.raises(InfercastError, match="3-bit"):
        precision({"quant_method": "gptq", "bits": 3})


def test_unknown_family_ffn_gating_follows_hidden_act(hf_configs, tmp_path):
    llama_like = _load(tmp_path, _llama_config(hf_configs, model_type="my_llama"))
    assert llama_like.gated_ffn and "gated silu FFN" in llama_like.family
    assert llama_like.total_params == get_model("llama-3.1-8b").total_params
    plain = _load(tmp_path, _llama_config(hf_configs, model_type="starcoder2", hidden_act="gelu_pytorch_tanh"))
    assert not plain.gated_ffn and "plain gelu_pytorch_tanh FFN" in plain.family
    m = plain
    assert plain.dense_ffn_params_per_layer == 2 * m.hidden_size * m.intermediate_size  # up and down only
    # a known family keeps its gated FFN whatever the activation is called (Gemma's GeGLU)
    gemma = load_hf_config(hf_configs / "gemma-2-9b.json")
    assert gemma.gated_ffn and gemma.activation.startswith("gelu")


def test_unknown_model_suggests_nearest():
    with pytest.raises(InfercastError) as exc:
        get_model("llama-3.1-7b")
    assert "llama-3.1-8b" in str(exc.value) and exc.value.field == "model"


def test_parallelism_checks():
    m = get_model("llama-3.1-8b")
    with pytest.raises(InfercastError, match="does not divide"):
        m.check_parallelism(3)
    with pytest.raises(InfercastError, match="dense"):
        m.check_parallelism(2, ep=2)
    moe = get_model("qwen3-30b-a3b")
    moe.check_parallelism(4, ep=4)
    with pytest.raises(InfercastError, match="must divide"):
        moe.check_parallelism(2, ep=4)
