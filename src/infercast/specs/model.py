"""Decoder-only transformer architecture specs and the quantities derived from them.

Covers dense models with MHA/GQA/MQA, DeepSeek-style multi-head latent attention (MLA), mixture-of-experts
FFNs (routed + shared experts, leading dense layers) and sliding-window layers. Parameter counts and KV-cache
sizes are computed from the architecture, never copied from a model card (the card's figure is kept only
to check against).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from infercast.errors import InfercastError


class MoESpec(BaseModel):
    """Routed mixture-of-experts FFN."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_experts: int = Field(ge=1)
    experts_per_token: int = Field(ge=1)
    expert_intermediate_size: int = Field(ge=1)
    num_shared_experts: int = Field(default=0, ge=0)
    shared_expert_intermediate_size: int = Field(
        default=0, ge=0, description="Per shared expert; 0 means the routed expert size."
    )
    num_dense_layers: int = Field(default=0, ge=0, description="Leading layers with a dense FFN instead.")
    expert_bias: bool = False
    router_bias: bool = False

    @model_validator(mode="after")
    def _k_le_e(self) -> MoESpec:
        if self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token must be <= num_experts")
        return self

    @property
    def shared_size(self) -> int:
        return self.shared_expert_intermediate_size or self.expert_intermediate_size


class MLASpec(BaseModel):
    """DeepSeek multi-head latent attention: K/V are cached as one compressed latent per token."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    q_lora_rank: int | None = Field(default=None, ge=1)
    kv_lora_rank: int = Field(ge=1)
    qk_nope_head_dim: int = Field(ge=1)
    qk_rope_head_dim: int = Field(ge=1)
    v_head_dim: int = Field(ge=1)


class ModelSpec(BaseModel):
    """A decoder-only transformer. Sizes are those of the HF ``config.json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str
    family: str
    source: str = Field(description="Where the architecture numbers come from (config.json URL/path).")
    num_layers: int = Field(ge=1)
    hidden_size: int = Field(ge=1)
    num_attention_heads: int = Field(ge=1)
    num_kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    intermediate_size: int = Field(ge=0, description="Dense FFN width (dense layers of MoE models too).")
    gated_ffn: bool = Field(default=True, description="SwiGLU/GeGLU (3 matrices) vs plain MLP (2).")
    activation: str = "silu"
    vocab_size: int = Field(ge=1)
    tie_word_embeddings: bool = False
    max_context: int = Field(ge=1)
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    norms_per_layer: int = Field(default=2, ge=0, description="Gemma-2 has 4 (pre and post norms).")
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    sliding_window: int | None = Field(default=None, ge=1)
    num_sliding_layers: int = Field(default=0, ge=0, description="Layers that attend only to the window.")
    attention_sinks: bool = Field(
        default=False, description="Learned per-head sink logits (gpt-oss): no extra KV-cache entries."
    )
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    default_precision: str = "bf16"
    published_params: float | None = None
    published_active_params: float | None = None
    published_active_excludes_embedding: bool = Field(
        default=False, description="The card's active count leaves out the input embedding (gpt-oss)."
    )
    published_source: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.num_sliding_layers > self.num_layers:
            raise ValueError("num_sliding_layers must be <= num_layers")
        if self.num_sliding_layers and self.sliding_window is None:
            raise ValueError("num_sliding_layers > 0 needs sliding_window")
        if self.moe and self.moe.num_dense_layers > self.num_layers:
            raise ValueError("moe.num_dense_layers must be <= num_layers")
        if self.moe is None and self.intermediate_size == 0:
            raise ValueError("a dense model needs intermediate_size > 0")
        return self

    # ----- layer mix -------------------------------------------------------------------------------------
    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.moe.num_dense_layers if self.moe else 0

    @property
    def num_dense_ffn_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    @property
    def num_full_attention_layers(self) -> int:
        return self.num_layers - self.num_sliding_layers

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def attention_kind(self) -> str:
        if self.mla:
            return "MLA"
        if self.num_kv_heads == 1:
            return "MQA"
        if self.num_kv_heads == self.num_attention_heads:
            return "MHA"
        return "GQA"

    # ----- parameter counts (per tensor class) -----------------------------------------------------------
    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """LM-head matrix elements (streamed at every step even when tied to the embedding)."""
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_stored_params(self) -> int:
        """LM-head parameters stored separately (0 when tied to the embedding)."""
        return 0 if self.tie_word_embeddings else self.lm_head_params

    @property
    def q_proj_dim(self) -> int:
        """Query projection width: heads x (q/k head dim)."""
        if self.mla:
            return self.num_attention_heads * (self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim)
        return self.num_attention_heads * self.head_dim

    @property
    def attention_params_per_layer(self) -> int:
        """Weights (and biases) of one attention block, excluding norms."""
        h, nq = self.hidden_size, self.num_attention_heads
        if self.mla:
            m = self.mla
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * nq * qk if m.q_lora_rank else h * nq * qk
            kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
            kv_b = m.kv_lora_rank * nq * (m.qk_nope_head_dim + m.v_head_dim)
            o = nq * m.v_head_dim * h
            return q + kv_a + kv_b + o + (nq if self.attention_sinks else 0)
        hd, nkv = self.head_dim, self.num_kv_heads
        qkv_out = (nq + 2 * nkv) * hd
        params = h * qkv_out + nq * hd * h
        if self.qkv_bias:
            params += qkv_out
        if self.o_bias:
            params += h
        if self.qk_norm:
            params += 2 * hd
        if self.attention_sinks:
            params += nq
        return params

    def _mlp_params(self, width: int) -> int:
        mats = 3 if self.gated_ffn else 2
        params = mats * self.hidden_size * width
        if self.mlp_bias:
            params += (mats - 1) * width + self.hidden_size
        return params

    @property
    def dense_ffn_params_per_layer(self) -> int:
        return self._mlp_params(self.intermediate_size)

    @property
    def expert_params(self) -> int:
        """One routed expert's FFN weights (and biases)."""
        if not self.moe:
            return 0
        mats = 3 if self.gated_ffn else 2
        width = self.moe.expert_intermediate_size
        params = mats * self.hidden_size * width
        if self.moe.expert_bias:
            params += (mats - 1) * width + self.hidden_size
        return params

    @property
    def shared_expert_params_per_layer(self) -> int:
        if not self.moe or not self.moe.num_shared_experts:
            return 0
        return self.moe.num_shared_experts * self._mlp_params(self.moe.shared_size)

    @property
    def router_params_per_layer(self) -> int:
        if not self.moe:
            return 0
        return self.hidden_size * self.moe.num_experts + (self.moe.num_experts if self.moe.router_bias else 0)

    @property
    def norm_params(self) -> int:
        per_norm = self.hidden_size * (2 if self.norm == "layernorm" else 1)
        return self.num_layers * self.norms_per_layer * per_norm + per_norm

    @property
    def routed_expert_params(self) -> int:
        """All routed-expert weights of the model."""
        return self.num_moe_layers * self.moe.num_experts * self.expert_params if self.moe else 0

    @property
    def dense_linear_params(self) -> int:
        """Linear weights outside routed experts and embeddings: attention, dense FFNs, shared experts, routers."""
        return (
            self.num_layers * self.attention_params_per_layer
            + self.num_dense_ffn_layers * self.dense_ffn_params_per_layer
            + self.num_moe_layers * (self.shared_expert_params_per_layer + self.router_params_per_layer)
        )

    @property
    def total_params(self) -> int:
        """Every stored parameter (tied embeddings counted once)."""
        return (
            self.embedding_params
            + self.lm_head_stored_params
            + self.dense_linear_params
            + self.routed_expert_params
            + self.norm_params
        )

    @property
    def active_params(self) -> int:
        """Parameters one token uses: routed experts counted k of E; embedding table counted whole
        (the convention of the Mixtral and Qwen cards; gpt-oss and DeepSeek's weights README leave
        the input embedding out, see :attr:`active_params_excluding_embedding`)."""
        if not self.moe:
            return self.total_params
        idle = self.num_moe_layers * (self.moe.num_experts - self.moe.experts_per_token) * self.expert_params
        return self.total_params - idle

    @property
    def active_params_excluding_embedding(self) -> int:
        """Active parameters without the input-embedding table (only one row is gathered per token)."""
        if self.tie_word_embeddings:
            return self.active_params
        return self.active_params - self.embedding_params

    # ----- KV cache --------------------------------------------------------------------------------------
    @property
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached values per token per layer: 2·n_kv·d_head (GQA/MQA/MHA) or kv_lora_rank + rope dim (MLA)."""
        if self.mla:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def kv_heads_per_rank(self, tp: int) -> float:
        """KV heads each tensor-parallel rank holds; heads are replicated, not split, when tp > n_kv."""
        if self.mla:
            return 1.0
        return max(self.num_kv_heads / tp, 1.0)

    def kv_elements_per_token_per_layer_per_rank(self, tp: int) -> float:
        """Per-rank cached values per token per layer (MLA's latent is replicated on every rank, as in vLLM)."""
        if self.mla:
            return float(self.kv_elements_per_token_per_layer)
        return 2 * self.kv_heads_per_rank(tp) * self.head_dim

    def kv_bytes_per_token(self, kv_bytes_per_element: float, tp: int = 1) -> float:
        """KV bytes a new token adds on one rank while the context is within every window (all layers grow)."""
        return self.num_layers * self.kv_elements_per_token_per_layer_per_rank(tp) * kv_bytes_per_element

    def kv_bytes_for_context(self, context: int, kv_bytes_per_element: float, tp: int = 1) -> float:
        """KV bytes one sequence of ``context`` tokens holds on one rank (sliding layers keep only the window)."""
        per_layer = self.kv_elements_per_token_per_layer_per_rank(tp) * kv_bytes_per_element
        sliding_tokens = min(context, self.sliding_window) if self.sliding_window else context
        return per_layer * (self.num_full_attention_layers * context + self.num_sliding_layers * sliding_tokens)

    # ----- tensor/expert parallel validity ----------------------------------------------------------------
    def check_parallelism(self, tp: int, ep: int = 1) -> None:
        """Raise a clear error when the model cannot be split ``tp`` ways (experts ``ep`` ways)."""
        if self.num_attention_heads % tp:
            raise InfercastError(
                f"{tp} does not divide the {self.num_attention_heads} attention heads of {self.id}; "
                f"allowed: {', '.join(str(d) for d in _divisors(self.num_attention_heads) if d <= 64)}",
                field="tp",
            )
        if not self.mla and self.num_kv_heads % tp and tp % self.num_kv_heads:
            raise InfercastError(
                f"tp={tp} neither divides nor is a multiple of the {self.num_kv_heads} KV heads of {self.id}",
                field="tp",
            )
        if ep > 1:
            if not self.moe:
                raise InfercastError(f"{self.id} is dense; expert parallelism needs an MoE model", field="ep")
            if tp % ep:
                raise InfercastError(f"ep={ep} must divide tp={tp} (experts split within the TP group)", field="ep")
            if self.moe.num_experts % ep:
                raise InfercastError(
                    f"ep={ep} does not divide the {self.moe.num_experts} experts of {self.id}", field="ep"
                )
        if self.moe:
            expert_tp = tp // ep
            if self.moe.expert_intermediate_size % expert_tp:
                raise InfercastError(
                    f"expert FFN width {self.moe.expert_intermediate_size} is not divisible by tp/ep={expert_tp}",
                    field="tp",
                )

    def summary(self) -> dict[str, object]:
        """Key architecture facts and derived counts, for display."""
        out: dict[str, object] = {
            "id": self.id,
            "name": self.name,
            "family": self.family,
            "attention": self.attention_kind,
            "layers": self.num_layers,
            "hidden_size": self.hidden_size,
            "heads": self.num_attention_heads,
            "kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "ffn": f"{'gated ' if self.gated_ffn else ''}{self.activation}, {self.intermediate_size}",
            "vocab_size": self.vocab_size,
            "tied_embeddings": self.tie_word_embeddings,
            "max_context": self.max_context,
            "total_params": self.total_params,
            "active_params": self.active_params,
            "kv_values_per_token_per_layer": self.kv_elements_per_token_per_layer,
            "source": self.source,
        }
        if self.moe:
            out["moe"] = (
                f"{self.moe.num_experts} experts, top-{self.moe.experts_per_token}, width "
                f"{self.moe.expert_intermediate_size}, {self.moe.num_shared_experts} shared, "
                f"{self.moe.num_dense_layers} dense layers"
            )
        if self.mla:
            out["mla"] = f"kv_lora_rank {self.mla.kv_lora_rank}, rope dim {self.mla.qk_rope_head_dim}"
        if self.sliding_window:
            out["sliding_window"] = f"{self.sliding_window} tokens on {self.num_sliding_layers} layers"
        return out


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
