"""The tiny decoder the harness and engine tests run on CPU: two layers, GQA, a 97-token vocabulary."""

from __future__ import annotations

from infercast.specs.model import ModelSpec

TINY = dict(
    id="tiny",
    name="tiny",
    family="test",
    source="test",
    num_layers=2,
    hidden_size=64,
    num_attention_heads=4,
    num_kv_heads=2,
    head_dim=16,
    intermediate_size=128,
    vocab_size=97,
    max_context=512,
)


def tiny_spec(**over: object) -> ModelSpec:
    """The tiny model with ``over`` replacing its fields."""
    return ModelSpec(**{**TINY, **over})
