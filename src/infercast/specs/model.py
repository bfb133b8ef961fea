"""Decoder-only transformer architecture specs and the quantities derived from them.

Covers dense models with MHA/GQA/MQA, DeepSeek-style multi-head latent attention (MLA), mixture-of-experts
FFNs (routed + shared experts, dense layers), sliding-window and chunked local layers (Llama 4), DeepSeek sparse
attention (DSA: an indexer picks the top-k cached tokens each query reads; DeepSeek-V3.2, GLM-5) and hybrid
models whose linear-attention layers keep a fixed-size recurrent state instead of a KV cache (gated DeltaNet:
Qwen3-Next, Qwen3.5) and DeepSeek-V4's compressed attention (a sliding window plus per-layer compressed KV, sparse
on the CSA layers; :class:`CompressedAttentionSpec`). Parameter counts and KV-cache
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


COMPRESSOR_STATE_BYTES = 4
"""Bytes per element of a compressor's decode state: the reference DeepSeek-V4 inference code keeps ``kv_state`` and
``score_state`` buffers of (coff x ratio, coff x head_dim) fp32 values per sequence and compressed layer (the tokens
of the group being pooled and, for overlapping pools, the previous group)."""


class CompressedAttentionSpec(BaseModel):
    """DeepSeek-V4 hybrid attention (tech report section 2.3; HF ``model_type`` deepseek_v4).

    Every layer attends with ``num_attention_heads`` query heads to one shared K = V head of ``head_dim`` (MQA): the
    last ``window`` raw entries (sliding window) plus, when its ``compress_ratios`` entry r is > 0, entries that each
    pool r tokens. On CSA layers (r == ``indexer_ratio``, overlapping pools of 2r tokens) a lightning indexer picks
    the ``index_topk`` best compressed entries per query; on HCA layers (any other r > 0) every compressed entry is
    read; r == 0 is window only. Queries come through a ``q_lora_rank`` bottleneck, the output through ``o_groups``
    grouped projections to ``o_lora_rank`` each, and the residual stream is ``hc_mult`` copies mixed per layer by
    small learned matrices (manifold-constrained hyper-connections). The first ``num_hash_layers`` MoE layers route
    by a token-id hash: the same expert FFN work, so it changes no count.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    window: int = Field(ge=1, description="Raw (uncompressed) entries every layer keeps and reads: sliding_window.")
    compress_ratios: tuple[int, ...] = Field(description="Per decoder layer: tokens pooled per entry, 0 for none.")
    q_lora_rank: int = Field(ge=1)
    qk_rope_head_dim: int = Field(ge=1)
    o_groups: int = Field(ge=1)
    o_lora_rank: int = Field(ge=1)
    index_topk: int = Field(ge=1)
    index_n_heads: int = Field(ge=1)
    index_head_dim: int = Field(ge=1)
    indexer_ratio: int = Field(
        default=4, ge=1, description="Compress ratio of the CSA layers (indexer, overlapping pools); DeepSeek-V4: 4."
    )
    hc_mult: int = Field(default=4, ge=1, description="Residual-stream copies (hyper-connections).")
    num_hash_layers: int = Field(default=0, ge=0, description="Leading MoE layers routed by token-id hash.")

    @model_validator(mode="after")
    def _ratios(self) -> CompressedAttentionSpec:
        if not self.compress_ratios:
            raise ValueError("compress_ratios must list one ratio per layer")
        if any(r < 0 for r in self.compress_ratios):
            raise ValueError("compress_ratios entries must be >= 0 (0: no compression)")
        return self

    def coff(self, ratio: int) -> int:
        """Width factor of a compressor: 2 for the overlapping CSA pools (each entry pools 2r tokens), else 1."""
        return 2 if ratio == self.indexer_ratio else 1

    @property
    def csa_layers(self) -> int:
        """Layers with the indexer (top-k over their compressed entries)."""
        return sum(1 for r in self.compress_ratios if r == self.indexer_ratio)

    @property
    def compressed_ratios(self) -> list[int]:
        """Ratios of every compressed layer (CSA and HCA), in layer order."""
        return [r for r in self.compress_ratios if r]

    @property
    def hca_ratios(self) -> list[int]:
        """Ratios of the compressed layers without an indexer (they read every compressed entry)."""
        return [r for r in self.compressed_ratios if r != self.indexer_ratio]

    @property
    def indexer_key_bytes(self) -> int:
        """One cached indexer key: fp8 values plus an fp32 scale, as DSA's (:data:`INDEXER_KEY_SCALE_BYTES`)."""
        return self.index_head_dim + INDEXER_KEY_SCALE_BYTES

    def state_bytes_per_sequence(self, head_dim: int) -> float:
        """Compressor decode state of one sequence, all layers (replicated on every rank): fp32 kv and score buffers
        of (coff r) x (coff d) for the KV compressor (d = head_dim) and the CSA indexer's (d = index_head_dim)."""
        total = 0
        for r in self.compressed_ratios:
            c = self.coff(r)
            total += 2 * c * r * c * head_dim
            if r == self.indexer_ratio:
                total += 2 * c * r * c * self.index_head_dim
        return float(total * COMPRESSOR_STATE_BYTES)


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
    compressed_attention: CompressedAttentionSpec | None = None
    default_precision: str = "bf16"
    kv_cache_precision: str | None = Field(
        default=None,
        description="KV-cache format the checkpoint asks for (config.json quantization_config kv_cache_quant_algo "
        "or kv_cache_scheme); None: the engine's default.",
    )
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
        if self.compressed_attention:
            self._check_compressed()
        return self

    def _check_compressed(self) -> None:
        """DeepSeek-V4 compressed attention stands alone: one shared KV head, no other attention variant."""
        ca = self.compressed_attention
        assert ca is not None  # called only when compressed_attention is set
        if self.mla or self.sparse_attention or self.linear_attention or self.num_sliding_layers:
            raise ValueError(
                "compressed_attention cannot be combined with mla, sparse_attention, linear_attention or "
                "num_sliding_layers (its window is compressed_attention.window)"
            )
        if self.num_kv_heads != 1:
            raise ValueError(
                f"compressed_attention needs num_kv_heads 1 (one shared K=V head), got {self.num_kv_heads}"
            )
        if len(ca.compress_ratios) != self.num_layers:
            raise ValueError(
                f"compressed_attention.compress_ratios has {len(ca.compress_ratios)} entries for "
                f"{self.num_layers} layers"
            )
        if self.num_attention_heads % ca.o_groups:
            raise ValueError(
                f"compressed_attention.o_groups ({ca.o_groups}) must divide num_attention_heads "
                f"({self.num_attention_heads})"
            )
        if ca.qk_rope_head_dim > self.head_dim:
            raise ValueError(f"compressed_attention.qk_rope_head_dim must be <= head_dim ({self.head_dim})")

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
        if self.compressed_attention:
            # CSA layers read min(ctx / r, top-k) compressed entries = min(ctx, r * top-k) / r (cost/attention_variants)
            return self.compressed_attention.indexer_ratio * self.compressed_attention.index_topk
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
        if self.compressed_attention:
            kind += " + compressed (sliding window, CSA/HCA)"
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
        if self.compressed_attention:
            ca, hd = self.compressed_attention, self.head_dim
            q = h * ca.q_lora_rank + ca.q_lora_rank * nq * hd  # wq_a, wq_b
            o = nq * hd * ca.o_lora_rank + ca.o_groups * ca.o_lora_rank * h  # grouped wo_a, then wo_b
            return q + h * hd + o + (nq if self.attention_sinks else 0)  # + wkv (the shared K=V head)
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
    def compressed_attention_extra_params(self) -> int:
        """DeepSeek-V4 weights outside the per-layer attention/FFN counts (0 for other models): per layer the q/kv
        RMSNorms and the two hyper-connection mixes (fn of (2 + hc) hc x hc h, base, 3 scales), the final
        hyper-connection head; per compressed layer the compressor (wkv, wgate, position bias, norm) and on CSA
        layers the indexer (wq_b from the q latent, weights_proj, and its own overlapping compressor)."""
        ca = self.compressed_attention
        if not ca:
            return 0
        h, hd, hc = self.hidden_size, self.head_dim, ca.hc_mult
        mix = (2 + hc) * hc
        per_layer = ca.q_lora_rank + hd + 2 * (mix * hc * h + mix + 3)
        total = self.num_layers * per_layer + hc * hc * h + hc + 1
        for r in ca.compressed_ratios:
            c = ca.coff(r)
            total += 2 * h * c * hd + r * c * hd + hd
            if r == ca.indexer_ratio:
                di, ni = ca.index_head_dim, ca.index_n_heads
                total += ca.q_lora_rank * ni * di + h * ni + 2 * h * c * di + r * c * di + di
        return total

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
            + self.compressed_attention_extra_params
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
        if self.compressed_attention:
            return self.head_dim  # one entry serves as key and value
        return 2 * self.num_kv_heads * self.head_dim

    def kv_heads_per_rank(self, tp: int) -> float:
        """KV heads each tensor-parallel rank holds; heads are replicated, not split, when tp > n_kv."""
        if self.mla:
            return 1.0
        return max(self.num_kv_heads / tp, 1.0)

    def kv_elements_per_token_per_layer_per_rank(self, tp: int) -> float:
        """Per-rank cached values per token per layer (MLA's latent is replicated on every rank, as in vLLM)."""
        if self.mla or self.compressed_attention:
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
        grows; linear-attention layers have no per-token cache). Compressed attention (DeepSeek-V4): the long-run
        growth, one entry (and indexer key on CSA layers) per r tokens of each compressed layer; its window and
        compressor state are :meth:`fixed_kv_bytes_per_sequence`."""
        if self.compressed_attention:
            ca = self.compressed_attention
            entry = self.kv_elements_per_token_per_layer * kv_bytes_per_element
            return sum((entry + self.compressed_indexer_bytes(r)) / r for r in ca.compressed_ratios)
        return self.num_attention_layers * self.kv_bytes_per_token_per_layer(kv_bytes_per_element, tp)

    def compressed_indexer_bytes(self, ratio: int) -> int:
        """Indexer key bytes one compressed entry of a layer with ``ratio`` carries (CSA layers only)."""
        ca = self.compressed_attention
        if ca is None:
            return 0
        return ca.indexer_key_bytes if ratio == ca.indexer_ratio else 0

    def fixed_kv_bytes_per_sequence(self, kv_bytes_per_element: float, tp: int = 1) -> float:
        """Per-sequence cache bytes that do not grow with the context, on one rank (0 but for compressed attention):
        every layer's full window of raw entries, one not-yet-complete compressed entry per compressed layer and the
        compressor state (:meth:`CompressedAttentionSpec.state_bytes_per_sequence`), all replicated per rank. With
        :meth:`kv_bytes_per_token` x context it bounds :meth:`kv_bytes_for_context` from above at every context."""
        ca = self.compressed_attention
        if not ca:
            return 0.0
        entry = self.kv_elements_per_token_per_layer * kv_bytes_per_element
        window = self.num_layers * ca.window * entry
        partial = sum(entry + self.compressed_indexer_bytes(r) for r in ca.compressed_ratios)
        return window + partial + ca.state_bytes_per_sequence(self.head_dim)

    def kv_bytes_for_context(self, context: int, kv_bytes_per_element: float, tp: int = 1) -> float:
        """KV bytes one sequence of ``context`` tokens holds on one rank (sliding layers keep only the window;
        the fixed linear-attention state is :meth:`state_bytes_per_sequence`)."""
        if self.compressed_attention:
            ca = self.compressed_attention
            entry = self.kv_elements_per_token_per_layer * kv_bytes_per_element
            ratios = ca.compressed_ratios
            compressed = sum(-(-context // r) * (entry + self.compressed_indexer_bytes(r)) for r in ratios)
            return self.num_layers * min(context, ca.window) * entry + compressed
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
        ca = self.compressed_attention
        if ca and ca.o_groups % tp:
            raise InfercastError(
                f"tp={tp} does not divide the {ca.o_groups} output-projection groups of {self.id}; allowed: "
                f"{', '.join(str(d) for d in _divisors(ca.o_groups))} (or attention-dp for more GPUs)",
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
        if self.compressed_attention:
            ca = self.compressed_attention
            hca = sorted(set(ca.hca_ratios))
            out["compressed_attention"] = (
                f"window of {ca.window} raw entries on all {self.num_layers} layers; {ca.csa_layers} CSA layers "
                f"(1 entry per {ca.indexer_ratio} tokens, indexer top-{ca.index_topk}, {ca.index_n_heads} x "
                f"{ca.index_head_dim}); {len(ca.hca_ratios)} HCA layers (1 entry per {'/'.join(map(str, hca))} "
                f"tokens, all read); q rank {ca.q_lora_rank}, {ca.o_groups} output groups of rank {ca.o_lora_rank}; "
                f"{ca.hc_mult} hyper-connection copies; {ca.num_hash_layers} hash-routed MoE layers"
            )
            out["approximations"] = (
                "CSA reads priced as r x top-k contiguous tokens (gather not priced apart); the window as a full "
                f"{ca.window} entries per query; KV entries as head_dim values of the KV format (the reference's fp8 "
                "nope + bf16 rope layout differs); pool blocks count window and compressor state as fixed "
                "per-sequence state; hash-routed layers priced as routed ones; hyper-connections as one GEMV + two "
                "elementwise passes per mix; the release's FP4 experts + FP8 rest map to mxfp4-moe (dense 16-bit)"
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
