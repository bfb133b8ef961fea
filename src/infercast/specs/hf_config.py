"""Build a :class:`ModelSpec` from a HuggingFace ``config.json`` on disk (no network access).

Families read: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v2/v3, gemma, gemma2,
gemma3(_text), gpt_oss, phi3, and the 2026 families: deepseek_v32 and glm_moe_dsa (MLA + DeepSeek sparse
attention), kimi_k2/kimi_k25 (DeepSeek-V3-style MLA MoE; K2.5's multimodal config is read from its
``text_config``), minimax_m2 (GQA MoE, full attention on every layer), qwen3_next and qwen3_5_moe (gated
DeltaNet linear attention on 3 of every 4 layers, gated full attention on the rest), llama4 (MoE interleaved
with dense FFNs, chunked local attention on the RoPE layers), deepseek_v4 (DeepSeek-V4 Pro/Flash: one shared KV head,
sliding window plus per-layer compressed KV with an indexer on the CSA layers, grouped low-rank output projection,
hyper-connections; see :func:`_compressed_attention`); all of them have gated FFNs (SwiGLU/GeGLU:
gate, up and down matrices). Other configs are read with the generic keys as llama-like decoders and say so in
``family``; their FFN is taken as gated only when ``hidden_act`` is a SiLU/Swish-family activation (the llama
recipe), otherwise as a plain two-matrix MLP (GPT-2, OPT, Falcon, StarCoder2 style with gelu/relu).

The default precision comes from ``quantization_config`` when there is one (see :func:`_quant_precision`),
otherwise from ``torch_dtype``; a quantization the predictor has no scheme for is an error rather than a
silent bf16.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, overload

from pydantic import ValidationError

from infercast.errors import InfercastError
from infercast.files import is_dir, load_json
from infercast.specs.model import (
    CompressedAttentionSpec,
    LinearAttentionSpec,
    MLASpec,
    ModelSpec,
    MoESpec,
    SparseAttentionSpec,
)

SUPPORTED_TYPES = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "gpt_oss",
    "phi3",
    "deepseek_v32",
    "glm_moe_dsa",
    "kimi_k2",
    "kimi_k25",
    "minimax_m2",
    "qwen3_next",
    "qwen3_5_moe",
    "qwen3_5_moe_text",
    "llama4",
    "llama4_text",
    "deepseek_v4",
)

_MLA_TYPES = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa", "kimi_k2", "kimi_k25")
_HYBRID_TYPES = ("qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text")
"""Gated DeltaNet + gated full attention (Qwen3-Next recipe)."""
_QK_NORM_TYPES = ("qwen3", "qwen3_moe", "gemma3", "gemma3_text", *_HYBRID_TYPES)

_GATED_ACTIVATIONS = ("silu", "swish", "swiglu")
"""hidden_act values that mean a gated (SwiGLU) FFN in a config of an unknown family."""

MAX_CONFIG_INT = 2**31 - 1
"""Largest integer a config.json size may hold: the biggest real ones (vocab ~10^6, context ~10^7) are far below,
and it keeps every derived product inside int64/float64 exactness."""

_MAX_CONTEXT_KEYS = ("max_position_embeddings", "max_sequence_length", "n_positions", "seq_length")


def load_hf_config(path: str | Path, model_id: str | None = None) -> ModelSpec:
    """Read ``config.json`` (or a folder holding one) into a ModelSpec, with one-line errors on bad input."""
    path = Path(path).expanduser()
    if is_dir(path):
        path = path / "config.json"
    raw = load_json(path, "model")  # one-line errors: missing, folder, non-UTF-8, NaN/Infinity, too deep
    if not isinstance(raw, dict):
        raise InfercastError(f"{path} must hold a JSON object", field="model")
    name = model_id or (path.parent.name if path.name == "config.json" else path.stem)
    try:
        return spec_from_hf_dict(raw, model_id=name.lower(), source=str(path))
    except ValidationError as exc:  # a sub-spec (MLA ranks, sliding window...) out of range
        raise _invalid(exc, f"{path} gives an invalid architecture") from None


def _invalid(exc: ValidationError, what: str) -> InfercastError:
    """The one-line error for a spec the config's fields fail to validate: ``what (location: reason)``."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    return InfercastError(f"{what} ({loc + ': ' if loc else ''}{err['msg']})", field="model")


def _get(cfg: dict[str, Any], key: str, *alts: str, default: Any = ..., where: str = "config.json") -> Any:
    for k in (key, *alts):
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    if default is ...:
        raise InfercastError(f"{where} lacks required field {key!r}", field="model")
    return default


@overload
def _int(cfg: dict[str, Any], key: str, *alts: str, minimum: int = 0) -> int: ...
@overload
def _int(cfg: dict[str, Any], key: str, *alts: str, default: int, minimum: int = 0) -> int: ...
@overload
def _int(cfg: dict[str, Any], key: str, *alts: str, default: None, minimum: int = 0) -> int | None: ...


def _int(cfg: dict[str, Any], key: str, *alts: str, default: Any = ..., minimum: int = 0) -> int | None:
    """An integer field in [minimum, MAX_CONFIG_INT] (``minimum=1`` for a divisor), else a one-line error."""
    value = _get(cfg, key, *alts, default=default)
    if value is None:
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or int(value) != value
        or not minimum <= value <= MAX_CONFIG_INT
    ):
        raise InfercastError(
            f"config.json field {key!r} must be a {'non-negative' if minimum == 0 else 'positive'} integer <= "
            f"{MAX_CONFIG_INT}, got {value!r}",
            field="model",
        )
    return int(value)


def spec_from_hf_dict(raw: dict[str, Any], model_id: str, source: str) -> ModelSpec:
    """Map HF config keys onto ModelSpec fields (see module docstring for the families)."""
    text_config = raw.get("text_config")
    cfg: dict[str, Any] = text_config if isinstance(text_config, dict) else raw
    model_type = str(raw.get("model_type") or cfg.get("model_type") or "")
    family = model_type if model_type in SUPPORTED_TYPES else f"{model_type or 'unknown'} (read as llama-like)"

    hidden = _int(cfg, "hidden_size", "n_embd", "d_model")
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(cfg, "num_attention_heads", "n_head")
    kv_heads = _int(cfg, "num_key_value_heads", default=heads)
    head_dim = _int(cfg, "head_dim", default=hidden // heads if heads else 0)
    vocab = _int(cfg, "vocab_size")
    act = str(_get(cfg, "hidden_act", "hidden_activation", "activation_function", default="silu"))
    gated = model_type in SUPPORTED_TYPES or act.lower() in _GATED_ACTIVATIONS
    if model_type not in SUPPORTED_TYPES:
        family += f", {'gated' if gated else 'plain'} {act} FFN"
    tie_default = model_type.startswith("gemma")
    fields: dict[str, Any] = dict(
        id=model_id,
        name=str(raw.get("_name_or_path") or model_id),
        family=family,
        source=source,
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=_int(cfg, "intermediate_size", "ffn_dim", default=0),
        gated_ffn=gated,
        activation=act,
        vocab_size=vocab,
        tie_word_embeddings=bool(_get(raw, "tie_word_embeddings", default=tie_default)),
        max_context=_int(cfg, *_MAX_CONTEXT_KEYS),
        qkv_bias=bool(_get(cfg, "attention_bias", default=model_type == "qwen2" or model_type == "qwen2_moe")),
        o_bias=bool(_get(cfg, "attention_bias", default=False)) and model_type not in ("qwen2", "qwen2_moe"),
        mlp_bias=bool(_get(cfg, "mlp_bias", default=False)),
        # Llama 4's qk-norm is a weightless L2 norm (no parameters); MiniMax-M2 says use_qk_norm
        qk_norm=model_type in _QK_NORM_TYPES or (model_type == "minimax_m2" and bool(cfg.get("use_qk_norm"))),
        norms_per_layer=4 if model_type in ("gemma2", "gemma3", "gemma3_text") else 2,
        default_precision=_default_precision(raw, cfg),
        kv_cache_precision=_kv_cache_precision(raw, cfg),
    )
    fields.update(_sliding(cfg, model_type, layers))
    fields.update(_chunked(cfg, model_type, layers))
    if model_type == "gpt_oss":
        fields["attention_sinks"] = True
    if model_type == "deepseek_v4":
        fields["attention_sinks"] = True  # attn_sink: one learned logit per head
        fields["compressed_attention"] = _compressed_attention(cfg, layers)
        if str(cfg.get("expert_dtype", "")).lower() == "fp4":
            # FP4 (e2m1, ue8m0 block scales) routed experts; the rest is FP8 with 128x128 blocks in the release:
            # the closest scheme is mxfp4-moe (its dense weights and GEMMs are 16-bit: an upper bound on those)
            fields["default_precision"] = "mxfp4-moe"
    moe = _moe(cfg, model_type, layers)
    if moe is not None:
        fields["moe"] = moe
        if not fields["intermediate_size"]:
            fields["intermediate_size"] = moe.expert_intermediate_size
    if model_type in _HYBRID_TYPES:
        fields["attn_output_gate"] = bool(cfg.get("attn_output_gate", True))
        linear = _linear_attention(cfg, layers)
        if linear is not None:
            fields["linear_attention"] = linear
    if model_type in ("llama4", "llama4_text") and "intermediate_size_mlp" in cfg:
        fields["intermediate_size"] = _int(cfg, "intermediate_size_mlp")  # width of the dense (non-MoE) layers
    if model_type in _MLA_TYPES:
        fields.update(_mla_fields(cfg, heads))
    try:
        return ModelSpec(**fields)
    except ValidationError as exc:
        raise _invalid(exc, "config.json gives an invalid architecture") from None


def _mla_fields(cfg: dict[str, Any], heads: int) -> dict[str, Any]:
    """DeepSeek-style multi-head latent attention (and DSA's indexer where ``index_topk`` is given): the MLA
    spec, the head dim it implies and one latent KV per head."""
    fields: dict[str, Any] = {}
    if "index_topk" in cfg:
        fields["sparse_attention"] = SparseAttentionSpec(
            index_topk=_int(cfg, "index_topk"),
            index_n_heads=_int(cfg, "index_n_heads"),
            index_head_dim=_int(cfg, "index_head_dim"),
        )
    mla = MLASpec(
        q_lora_rank=_int(cfg, "q_lora_rank", default=None),
        kv_lora_rank=_int(cfg, "kv_lora_rank"),
        qk_nope_head_dim=_int(cfg, "qk_nope_head_dim"),
        qk_rope_head_dim=_int(cfg, "qk_rope_head_dim"),
        v_head_dim=_int(cfg, "v_head_dim"),
    )
    fields["mla"] = mla
    fields["head_dim"] = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    fields["num_kv_heads"] = heads
    return fields


def _default_precision(raw: dict[str, Any], cfg: dict[str, Any] | None = None) -> str:
    quant = raw.get("quantization_config")
    if not isinstance(quant, dict) and cfg is not None:
        quant = cfg.get("quantization_config")  # Kimi-K2.5-style multimodal configs keep it in text_config
    if isinstance(quant, dict):
        return _quant_precision(quant)
    if quant is not None:
        raise InfercastError(
            f"config.json quantization_config must be an object with quant_method, got {quant!r}", field="model"
        )
    dtype = str(raw.get("torch_dtype") or raw.get("dtype") or "bfloat16")
    return "fp16" if dtype in ("float16", "fp16") else "bf16"


def _kv_cache_precision(raw: dict[str, Any], cfg: dict[str, Any] | None = None) -> str | None:
    """The KV-cache format a ``quantization_config`` asks for: ModelOpt's ``kv_cache_quant_algo`` (FP8) or
    compressed-tensors' ``kv_cache_scheme`` (8-bit float or int); None when it asks for none (model dtype)."""
    quant = raw.get("quantization_config")
    if not isinstance(quant, dict) and cfg is not None:
        quant = cfg.get("quantization_config")
    if not isinstance(quant, dict):
        return None
    algo = quant.get("kv_cache_quant_algo")
    if isinstance(algo, str) and algo.upper() in ("FP8", "INT8"):
        return algo.lower()
    kv = quant.get("kv_cache_scheme")
    if isinstance(kv, dict) and kv.get("num_bits") == 8:
        return "int8" if str(kv.get("type", "float")).lower() == "int" else "fp8"
    return None


_QUANT_METHODS = ("fp8", "fbgemm_fp8", "mxfp4", "awq", "gptq", "compressed-tensors", "modelopt")


def _quant_error(text: str) -> InfercastError:
    return InfercastError(
        f"config.json quantization_config: {text}; the model's precision cannot be inferred", field="model"
    )


def _quant_precision(quant: dict[str, Any]) -> str:
    """The precision scheme a ``quantization_config`` describes.

    fp8 / fbgemm_fp8 -> fp8 (W8A8); mxfp4 -> mxfp4-moe (gpt-oss: MXFP4 experts); awq -> int4 (W4A16);
    gptq -> int4 or w8a16 by ``bits``; modelopt -> fp8 or nvfp4 by ``quant_algo``; compressed-tensors ->
    read from ``config_groups`` (see :func:`_compressed_tensors_precision`).
    """
    method = str(quant.get("quant_method", "")).lower()
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8"
    if method == "mxfp4":
        return "mxfp4-moe"
    if method in ("awq", "gptq"):
        bits = quant.get("bits", quant.get("w_bit", 4))
        by_bits = {4: "int4", 8: "w8a16"} if method == "gptq" else {4: "int4"}
        if not isinstance(bits, int) or bits not in by_bits:
            raise _quant_error(f"{method} with {bits}-bit weights is not supported (only {sorted(by_bits)} bits)")
        return by_bits[bits]
    if method == "modelopt":
        algo = str(quant.get("quant_algo", "")).upper()
        if algo in ("FP8", "NVFP4"):
            return algo.lower()
        raise _quant_error(f"modelopt quant_algo {algo or None!r} is not supported (FP8, NVFP4)")
    if method == "compressed-tensors" or (not method and quant.get("format") == "pack-quantized"):
        scheme = _compressed_tensors_precision(quant)
        # Kimi K2-Thinking/K2.5: only the routed experts are INT4; attention, shared experts and the dense layer
        # are listed in `ignore` and stay in BF16
        ignore = quant.get("ignore") or []
        if scheme == "int4" and any("self_attn" in str(name) for name in ignore):
            return "int4-moe"
        return scheme
    raise _quant_error(f"quant_method {method or None!r} is not supported; known: {', '.join(_QUANT_METHODS)}")


_COMPRESSED_TENSORS = {
    # (weight type, weight bits, input-activation bits or None for weight-only) -> scheme
    ("float", 8, 8): "fp8",
    ("int", 8, 8): "int8",
    ("int", 8, None): "w8a16",
    ("int", 4, None): "int4",
    ("float", 4, 4): "nvfp4",
}


def _compressed_tensors_precision(quant: dict[str, Any]) -> str:
    """Map compressed-tensors ``config_groups`` (weights ``num_bits``/``type``, input activations) to a scheme.

    FP8 W8A8 -> fp8, INT8 W8A8 -> int8, INT8 weight-only -> w8a16, INT4 weight-only (W4A16) -> int4,
    NVFP4 W4A4 -> nvfp4. Every group must map to the same scheme.
    """
    groups = quant.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise _quant_error("compressed-tensors without config_groups")
    found: set[str] = set()
    for name, group in groups.items():
        weights = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(weights, dict):
            raise _quant_error(f"compressed-tensors group {name!r} has no weights entry")
        acts = group.get("input_activations")
        act_bits = acts.get("num_bits") if isinstance(acts, dict) else None
        key = (str(weights.get("type", "int")).lower(), weights.get("num_bits"), act_bits)
        if not all(isinstance(k, int | str | None) for k in key) or key not in _COMPRESSED_TENSORS:
            w_type, w_bits, a_bits = key
            raise _quant_error(
                f"compressed-tensors group {name!r} ({w_type}{w_bits} weights, "
                f"{f'{a_bits}-bit' if a_bits else '16-bit'} activations) has no matching scheme; supported: "
                "FP8 W8A8, INT8 W8A8, INT8 W8A16, INT4 W4A16, NVFP4 W4A4"
            )
        found.add(_COMPRESSED_TENSORS[key])
    if len(found) > 1:
        raise _quant_error(f"compressed-tensors groups mix schemes ({', '.join(sorted(found))})")
    return found.pop()


def _sliding(cfg: dict[str, Any], model_type: str, layers: int) -> dict[str, Any]:
    if model_type == "deepseek_v4":
        return {}  # its window is part of the compressed attention (CompressedAttentionSpec.window)
    window = _int(cfg, "sliding_window", default=0)
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and window:
        n = sum(1 for t in layer_types if "sliding" in str(t))
        return {"sliding_window": int(window), "num_sliding_layers": n} if n else {}
    if not window:
        return {}
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        if not cfg.get("use_sliding_window", False):
            return {}
        # Qwen applies the window to layers at index >= max_window_layers.
        n = max(layers - _int(cfg, "max_window_layers", default=layers), 0)
        return {"sliding_window": int(window), "num_sliding_layers": n} if n else {}
    if model_type == "gemma2":
        return {"sliding_window": int(window), "num_sliding_layers": layers // 2}
    if model_type in ("gemma3", "gemma3_text"):
        pattern = _int(cfg, "sliding_window_pattern", default=6, minimum=1)
        n = layers - layers // pattern
        return {"sliding_window": int(window), "num_sliding_layers": n}
    return {"sliding_window": int(window), "num_sliding_layers": layers}


def _chunked(cfg: dict[str, Any], model_type: str, layers: int) -> dict[str, Any]:
    """Llama 4: the RoPE layers attend within chunks of ``attention_chunk_size`` tokens, the NoPE layers
    (``no_rope_layers`` entry 0, or every ``no_rope_layer_interval``-th layer, default 4) attend globally."""
    if model_type not in ("llama4", "llama4_text"):
        return {}
    chunk = _int(cfg, "attention_chunk_size", default=0)
    if not chunk:
        return {}
    flags = cfg.get("no_rope_layers")
    if isinstance(flags, list) and len(flags) == layers:
        n = sum(1 for f in flags if f)
    else:
        interval = _int(cfg, "no_rope_layer_interval", default=4, minimum=1)
        n = layers - layers // interval
    return {"sliding_window": int(chunk), "num_sliding_layers": n, "local_attention": "chunked"} if n else {}


_V4_LAYER_TYPES = {"sliding_attention": None, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
"""transformers-style DeepSeek-V4 ``layer_types`` -> default compress ratio (overridden by ``compress_rates``)."""


def _compress_ratios(cfg: dict[str, Any], layers: int) -> list[int]:
    """Per-layer compress ratios: ``compress_ratios`` (the release's config.json; entries past ``num_hidden_layers``
    belong to the MTP layers and are dropped) or transformers' ``layer_types`` with ``compress_rates``."""
    ratios = cfg.get("compress_ratios")
    if ratios is None and isinstance(cfg.get("layer_types"), list):
        given = cfg.get("compress_rates")
        rates: dict[str, Any] = given if isinstance(given, dict) else {}
        if any(not isinstance(t, str) or t not in _V4_LAYER_TYPES for t in cfg["layer_types"]):
            raise InfercastError(
                f"config.json field 'layer_types' must hold only {', '.join(_V4_LAYER_TYPES)}", field="model"
            )
        ratios = [0 if t == "sliding_attention" else rates.get(t, _V4_LAYER_TYPES[t]) for t in cfg["layer_types"]]
    if ratios is None:
        raise InfercastError("config.json lacks required field 'compress_ratios'", field="model")
    extra = _int(cfg, "num_nextn_predict_layers", default=0)
    if not isinstance(ratios, list) or len(ratios) not in (layers, layers + extra):
        raise InfercastError(
            f"config.json field 'compress_ratios' must list one ratio per layer ({layers}, or {layers + extra} with "
            f"the MTP layers), got {ratios!r:.80}",
            field="model",
        )
    out = []
    for r in ratios[:layers]:
        if isinstance(r, bool) or not isinstance(r, int) or r < 0:
            raise InfercastError(
                f"config.json field 'compress_ratios' entries must be integers >= 0, got {r!r}", field="model"
            )
        out.append(r)
    return out


def _compressed_attention(cfg: dict[str, Any], layers: int) -> CompressedAttentionSpec:
    """DeepSeek-V4 attention: window, per-layer ratios, q/o low-rank shapes, indexer, hyper-connections."""
    try:
        return CompressedAttentionSpec(
            window=_int(cfg, "sliding_window"),
            compress_ratios=tuple(_compress_ratios(cfg, layers)),
            q_lora_rank=_int(cfg, "q_lora_rank"),
            qk_rope_head_dim=_int(cfg, "qk_rope_head_dim"),
            o_groups=_int(cfg, "o_groups"),
            o_lora_rank=_int(cfg, "o_lora_rank"),
            index_topk=_int(cfg, "index_topk"),
            index_n_heads=_int(cfg, "index_n_heads"),
            index_head_dim=_int(cfg, "index_head_dim"),
            hc_mult=_int(cfg, "hc_mult"),
            num_hash_layers=_int(cfg, "num_hash_layers", default=0),
        )
    except ValidationError as exc:
        raise _invalid(exc, "config.json gives an invalid compressed-attention block") from None


def _linear_attention(cfg: dict[str, Any], layers: int) -> LinearAttentionSpec | None:
    """Gated DeltaNet layers: those ``layer_types`` marks linear_attention, else all but every
    ``full_attention_interval``-th layer (Qwen3-Next/Qwen3.5: 3 of every 4)."""
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        n = sum(1 for t in layer_types if t == "linear_attention")
    else:
        # 4 and the kernel width below: transformers' Qwen3NextConfig defaults, used when config.json omits them
        interval = _int(cfg, "full_attention_interval", default=4)
        n = layers - layers // interval if interval else 0
    if not n:
        return None
    try:
        return LinearAttentionSpec(
            num_layers=n,
            num_key_heads=_int(cfg, "linear_num_key_heads"),
            num_value_heads=_int(cfg, "linear_num_value_heads"),
            key_head_dim=_int(cfg, "linear_key_head_dim"),
            value_head_dim=_int(cfg, "linear_value_head_dim"),
            conv_kernel=_int(cfg, "linear_conv_kernel_dim", default=4),
        )
    except ValidationError as exc:
        raise _invalid(exc, "config.json gives an invalid linear-attention block") from None


def _moe(cfg: dict[str, Any], model_type: str, layers: int) -> MoESpec | None:
    experts = _int(cfg, "num_local_experts", "n_routed_experts", "num_experts", default=0)
    if not experts:
        return None
    k = _int(cfg, "num_experts_per_tok", "experts_per_token", "num_experts_per_token")
    width = _int(cfg, "moe_intermediate_size", default=0) or _int(cfg, "intermediate_size")
    dense_layers = _int(cfg, "first_k_dense_replace", default=0)
    mlp_only = cfg.get("mlp_only_layers") or []
    if not isinstance(mlp_only, list):
        raise InfercastError(f"config.json field 'mlp_only_layers' must be a list, got {mlp_only!r:.80}", field="model")
    if mlp_only:
        dense_layers = len(mlp_only)
    shared = _int(cfg, "n_shared_experts", default=0)
    shared_width = _int(cfg, "shared_expert_intermediate_size", default=0)
    if shared_width and not shared:
        shared = 1
    if model_type in ("llama4", "llama4_text"):
        # Llama4TextMoe always adds one shared expert as wide as a routed one; MoE every `step`-th layer
        shared = 1
        moe_layers = cfg.get("moe_layers")
        step = _int(cfg, "interleave_moe_layer_step", default=1)
        n_moe = len(moe_layers) if isinstance(moe_layers, list) else (layers // step if step else 0)
        dense_layers = layers - n_moe
    try:
        return MoESpec(
            num_experts=experts,
            experts_per_token=k,
            expert_intermediate_size=width,
            num_shared_experts=shared,
            shared_expert_intermediate_size=shared_width,
            num_dense_layers=dense_layers,
            expert_bias=model_type == "gpt_oss",
            router_bias=model_type == "gpt_oss",
        )
    except ValidationError as exc:
        raise _invalid(exc, "config.json gives an invalid MoE block") from None
