"""Decoder-only transformer architecture specs and the quantities derived from them.

Covers dense models with MHA/GQA/MQA, DeepSeek-style multi-head latent attention (MLA), mixture-of-experts
FFNs (routed + shared experts, dense layers), sliding-window and chunked local layers (Llama 4), DeepSeek sparse
attention (DSA: an indexer picks the top-k cached tokens each query reads; DeepSeek-V3.2, GLM-5) and hybrid
models whose linear-attention layers keep a fixed-size recurrent state instead of a KV cache (gated DeltaNet:
Qwen3-Next, Qwen3.5). Parameter counts and KV-cache
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
    num_dense_layers: int = Field(
        default=0,
        ge=0,
        description="Layers with a dense FFN instead (leading in DeepSeek/GLM/Kimi, interleaved in Llama 4 "
        "Maverick); only their count enters the counts and costs.",
    )
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


class SparseAttentionSpec(BaseModel):
    """DeepSeek sparse attention (DSA, DeepSeek-V3.2 / GLM-5): a lightning indexer scores every cached token with a
    few small fp8 heads, and the main (MLA) attention of each query reads only the ``index_topk`` best tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index_topk: int = Field(ge=1)
    index_n_heads: int = Field(ge=1)
    index_head_dim: int = Field(ge=1)


INDEXER_KEY_SCALE_BYTES = 4
"""Bytes of the per-token fp32 scale stored next to each fp8 indexer key (vLLM's DeepSeek-V3.2 indexer cache
holds ``index_head_dim`` fp8 values plus one fp32 scale per token and layer)."""


class LinearAttentionSpec(BaseModel):
    """Gated DeltaNet linear-attention layers (Qwen3-Next, Qwen3.5): per sequence a fixed (d_k x d_v) state per
    value head and a short causal-convolution window replace the growing KV cache."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_layers: int = Field(ge=1, description="Decoder layers that use linear attention (the rest: full attention).")
    num_key_heads: int = Field(ge=1)
    num_value_heads: int = Field(ge=1)
    key_head_dim: int = Field(ge=1)
    value_head_dim: int = Field(ge=1)
    conv_kernel: int = Field(default=4, ge=1)

    @property
    def key_dim(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim

    def state_elements_per_rank(self, tp: int) -> float:
        """Recurrent state (heads x d_k x d_v) plus convolution window ((kernel-1) x conv channels), one layer."""
        ssm = self.num_value_heads / tp * self.key_head_dim * self.value_head_dim
        conv = (self.conv_kernel - 1) * (2 * self.key_dim + self.value_dim) / tp
        return ssm + conv


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
    local_attention: Literal["sliding", "chunked"] = Field(
        default="sliding",
        description="What the windowed layers do: slide (each query sees the last W keys) or attend within "
        "fixed chunks of W tokens (Llama 4; priced as sliding, an upper bound: a chunk query sees 1..W keys).",
    )
    attn_output_gate: bool = Field(
        default=False, description="Query projection also emits a sigmoid output gate (Qwen3-Next/Qwen3.5)."
    )
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    sparse_attention: SparseAttentionSpec | None = None
    linear_attention: LinearAttentionSpec | None = None
    default_precision: str = "bf16"
    published_params: float | None = None
    published_active_params: float | None = None
    published_active_excludes_embedding: bool = Field(
        default=False, description="The card's active count leaves out the input embedding (gpt-oss)."
    )
    published_active_excludes_lm_head: bool = Field(
        default=False,
        description="The card's active count leaves out the LM head too (MiniMax: non-embedding parameters).",
    )
    published_source: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.num_sliding_layers > self.num_attention_layers:
            raise ValueError("num_sliding_layers must be <= the layers with (full or windowed) attention")
        if self.linear_attention and self.linear_attention.num_layers >= self.num_layers:
            raise ValueError("linear_attention.num_layers must leave at least one attention layer")
        if self.sparse_attention and not self.mla:
            raise ValueError("sparse_attention (DSA) is modelled on MLA models only (DeepSeek-V3.2, GLM-5)")
        if self.sparse_attention and self.num_sliding_layers:
            raise ValueError("sparse_attention cannot be combined with sliding-window layers")
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
    def num_linear_layers(self) -> int:
        """Layers with linear attention (a fixed-size state, no KV cache)."""
        return self.linear_attention.num_layers if self.linear_attention else 0

    @property
    def num_attention_layers(self) -> int:
        """Layers with softmax attention over cached tokens (full, windowed or sparse): the ones with a KV cache."""
        return self.num_layers - self.num_linear_layers

    @property
    def num_full_attention_layers(self) -> int:
        return self.num_attention_layers - self.num_sliding_layers

    @property
    def attention_window(self) -> int | None:
        """Most cached tokens one query's attention reads in the windowed layers: the sliding window or chunk
        size, or DSA's top-k (then every attention layer is windowed for the cost model, not for memory)."""
        if self.sparse_attention:
            return self.sparse_attention.index_topk
        return self.sliding_window

    @property
    def num_window_read_layers(self) -> int:
        """Attention layers whose reads stop at :attr:`attention_window` (sliding/chunked layers, or all under DSA)."""
        return self.num_attention_layers if self.sparse_attention else self.num_sliding_layers

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def attention_kind(self) -> str:
        if self.mla:
            kind = "MLA"
        elif self.num_kv_heads == 1:
            kind = "MQA"
        elif self.num_kv_heads == self.num_attention_heads:
            kind = "MHA"
        else:
            kind = "GQA"
        if self.sparse_attention:
            kind += " + DSA"
        if self.linear_attention:
            kind += " + linear (gated DeltaNet)"
        if self.num_sliding_layers and self.local_attention == "chunked":
            kind += " + chunked local"
        return kind

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
            return q + kv_a + kv_b + o + (nq if self.attention_sinks else 0) + self.indexer_params_per_layer
        hd, nkv = self.head_dim, self.num_kv_heads
        qkv_out = (nq * (2 if self.attn_output_gate else 1) + 2 * nkv) * hd
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

    @property
    def indexer_params_per_layer(self) -> int:
        """DSA lightning indexer: query up-projection from the q latent (or hidden), one key projection with a
        LayerNorm, and per-head weights (DeepSeek-V3.2 ``Indexer``: wq_b, wk, k_norm, weights_proj)."""
        sa = self.sparse_attention
        if not sa:
            return 0
        q_in = self.mla.q_lora_rank if self.mla and self.mla.q_lora_rank else self.hidden_size
        heads = sa.index_n_heads * sa.index_head_dim
        return (
            q_in * heads
            + self.hidden_size * sa.index_head_dim
            + 2 * sa.index_head_dim
            + self.hidden_size * (sa.index_n_heads)
        )

    @property
    def linear_attention_params_per_layer(self) -> int:
        """One gated DeltaNet layer's weights (see :class:`LinearAttentionSpec`)."""
        la = self.linear_attention
        if not la:
            return 0
        projections = self.hidden_size * (2 * la.key_dim + 2 * la.value_dim + 2 * la.num_value_heads)
        out = la.value_dim * self.hidden_size
        return (
            projections
            + out
            + (2 * la.key_dim + la.value_dim) * la.conv_kernel
            + 2 * la.num_value_heads
            + (la.value_head_dim)
        )

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
            self.num_attention_layers * self.attention_params_per_layer
            + self.num_linear_layers * self.linear_attention_params_per_layer
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
    def published_convention_active_params(self) -> int:
        """Active parameters counted the way this model's card counts them (for checks against the card)."""
        if self.published_active_excludes_lm_head:
            return self.active_params_excluding_embedding - self.lm_head_stored_params
        if self.published_active_excludes_embedding:
            return self.active_params_excluding_embedding
        return self.active_params

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

    @property
    def indexer_bytes_per_token_per_layer(self) -> int:
        """DSA indexer keys cached per token and layer: fp8 values plus an fp32 scale, whatever the KV format."""
        sa = self.sparse_attention
        return sa.index_head_dim + INDEXER_KEY_SCALE_BYTES if sa else 0

    def kv_bytes_per_token_per_layer(self, kv_bytes_per_element: float, tp: int = 1) -> float:
        """Bytes one token adds to one attention layer's cache on one rank (indexer keys included)."""
        return self.kv_elements_per_token_per_layer_per_rank(tp) * kv_bytes_per_element + (
            self.indexer_bytes_per_token_per_layer
        )

    def kv_bytes_per_token(self, kv_bytes_per_element: float, tp: int = 1) -> float:
        """KV bytes a new token adds on one rank while the context is within every window (every attention layer
        grows; linear-attention layers have no per-token cache)."""
        return self.num_attention_layers * self.kv_bytes_per_token_per_layer(kv_bytes_per_element, tp)

    def kv_bytes_for_context(self, context: int, kv_bytes_per_element: float, tp: int = 1) -> float:
        """KV bytes one sequence of ``context`` tokens holds on one rank (sliding layers keep only the window;
        the fixed linear-attention state is :meth:`state_bytes_per_sequence`)."""
        per_layer = self.kv_bytes_per_token_per_layer(kv_bytes_per_element, tp)
        sliding_tokens = min(context, self.sliding_window) if self.sliding_window else context
        return per_layer * (self.num_full_attention_layers * context + self.num_sliding_layers * sliding_tokens)

    def state_bytes_per_sequence(self, state_bytes_per_element: float, tp: int = 1) -> float:
        """Fixed per-sequence state of the linear-attention layers on one rank (0 without them): recurrent state and
        convolution window, stored in the model's 16-bit dtype as vLLM does by default (mamba_ssm_cache_dtype auto)."""
        la = self.linear_attention
        return la.num_layers * la.state_elements_per_rank(tp) * state_bytes_per_element if la else 0.0

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
        la = self.linear_attention
        if la and (la.num_key_heads % tp or la.num_value_heads % tp):
            raise InfercastError(
                f"tp={tp} does not divide the {la.num_key_heads} key / {la.num_value_heads} value heads of the "
                f"linear-attention layers of {self.id}; allowed: "
                f"{', '.join(str(d) for d in _divisors(la.num_key_heads) if la.num_value_heads % d == 0)}",
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
            what = "chunks of" if self.local_attention == "chunked" else "window of"
            out["sliding_window"] = f"{what} {self.sliding_window} tokens on {self.num_sliding_layers} layers"
        if self.sparse_attention:
            sa = self.sparse_attention
            out["sparse_attention"] = (
                f"DSA: top-{sa.index_topk} tokens per query, indexer {sa.index_n_heads} x {sa.index_head_dim}"
            )
        if self.linear_attention:
            la = self.linear_attention
            out["linear_attention"] = (
                f"gated DeltaNet on {la.num_layers} of {self.num_layers} layers: {la.num_key_heads} key / "
                f"{la.num_value_heads} value heads of {la.key_head_dim} x {la.value_head_dim}"
            )
        return out


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
