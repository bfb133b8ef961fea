"""The first N decoder layers of a model: what a layer-subset measurement runs and what its prediction prices.

One rule serves both sides. The torch harness (:mod:`infercast.harness.torch_model`) builds layer ``i`` as a
sliding-window layer when :func:`is_sliding_layer` says so, and the predictor
(:mod:`infercast.calibrate.predict`) prices a ``layers=N`` record with :func:`truncated`, whose sliding-layer
count is the number of those first N layers that slide. No torch import here.
"""

from __future__ import annotations

from infercast.errors import InfercastError
from infercast.specs.model import ModelSpec


def is_sliding_layer(spec: ModelSpec, index: int) -> bool:
    """Whether layer ``index`` (0-based) uses the sliding window.

    Full-attention layers are spread evenly, each the last of its group (Gemma 2/3: 1 full in every 2 or 6,
    gpt-oss: alternating, starting with a sliding layer); with every layer sliding (Mistral) all are.
    """
    full, total = spec.num_full_attention_layers, spec.num_layers
    return not ((index + 1) * full // total > index * full // total)


def sliding_layers(spec: ModelSpec, layers: int) -> int:
    """How many of the first ``layers`` layers slide (``spec.num_sliding_layers`` at full depth)."""
    return sum(is_sliding_layer(spec, i) for i in range(layers))


def truncated(spec: ModelSpec, layers: int) -> ModelSpec:
    """``spec`` cut to its first ``layers`` decoder layers (embedding and LM head kept).

    ``layers`` of 0, or at least the model's depth, means the whole model (returned unchanged). The cut
    model keeps the sliding layers among those first layers and MoE's leading dense layers.
    """
    if not layers or layers >= spec.num_layers:
        return spec
    update: dict[str, object] = {
        "num_layers": layers,
        "num_sliding_layers": sliding_layers(spec, layers),
        "id": f"{spec.id}[:{layers}]",
    }
    if spec.moe:
        update["moe"] = spec.moe.model_copy(update={"num_dense_layers": min(spec.moe.num_dense_layers, layers)})
    if spec.compressed_attention:  # DeepSeek-V4: the first layers' compress ratios
        ratios = spec.compressed_attention.compress_ratios[:layers]
        update["compressed_attention"] = spec.compressed_attention.model_copy(update={"compress_ratios": ratios})
    if spec.linear_attention:
        # full-attention layers spread evenly, each the last of its group (Qwen3-Next/Qwen3.5: every 4th)
        full, total = spec.num_attention_layers, spec.num_layers
        attention = sum((i + 1) * full // total > i * full // total for i in range(layers))
        if not attention:
            first = next(i for i in range(total) if (i + 1) * full // total > i * full // total)
            raise InfercastError(
                f"the first {layers} layers of {spec.id} are all linear-attention layers; take at least {first + 1}",
                field="layers",
            )
        update["linear_attention"] = spec.linear_attention.model_copy(update={"num_layers": layers - attention})
    return spec.model_copy(update=update)
