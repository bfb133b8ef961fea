"""The linear layers of a model as one tensor-parallel rank holds them.

One list serves both the memory budget (weight bytes per GPU) and the cost model (GEMM shapes per step),
so the two can never disagree. Splits follow vLLM/TensorRT-LLM: column-parallel QKV/gate-up, row-parallel
O/down, vocab-parallel embedding and LM head; K/V heads replicated when tp > n_kv; MLA's down-projections
(q_a, kv_a) replicated; routers replicated; with expert parallelism the experts are split ``ep`` ways and
each expert ``tp/ep`` ways. Linear-attention (gated DeltaNet) projections are split by heads like QKV/O; the
DSA indexer's projections are replicated (one small set of heads every rank scores with). DeepSeek-V4: q_b and the
grouped output projection split by heads (``o_groups`` / tp groups per rank), the single K=V head, compressors,
indexer and hyper-connection mixes replicated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infercast.specs.model import ModelSpec

WeightClass = Literal["dense", "expert", "embedding"]
RowSource = Literal["tokens", "samples", "expert_tokens", "gather"]


@dataclass(frozen=True)
class Linear:
    """One weight matrix (or a set of per-expert matrices) on one rank."""

    name: str
    group: str
    """Operator group for reports: attention, ffn, moe, embedding, lm_head."""
    k: float
    """Input features on this rank."""
    n: float
    """Output features on this rank."""
    layers: int
    """Number of decoder layers that have this matrix (1 for embedding / LM head)."""
    weight_class: WeightClass
    rows: RowSource
    """What sets the GEMM's M: all new tokens, sampled tokens only, tokens routed to an expert, or a gather."""
    experts: int = 1
    """Matrices of this shape on the rank (local routed experts); 1 otherwise."""
    replicated: bool = False

    @property
    def elements(self) -> float:
        """Weight elements on this rank, all layers."""
        return self.k * self.n * self.experts * self.layers


def rank_linears(model: ModelSpec, tp: int = 1, ep: int = 1, attention_dp: int = 1) -> list[Linear]:
    """Every weight matrix one rank of a ``tp``-way (``ep``-way for experts) replica holds.

    With attention data parallelism the attention and dense layers are replicated ``attention_dp`` times (each
    copy ``tp``-way) while the experts are split over all ``tp * attention_dp`` GPUs: ``ep``-way, each expert
    ``tp * attention_dp / ep``-way."""
    h = model.hidden_size
    out: list[Linear] = [
        Linear("embedding", "embedding", model.vocab_size / tp, h, 1, "embedding", "gather"),
    ]
    if model.compressed_attention:
        out.extend(_compressed_attention_linears(model, tp))
    elif model.mla:
        out.extend(_mla_linears(model, tp))
    else:
        kv_heads = model.kv_heads_per_rank(tp)
        nq, L = model.num_attention_heads, model.num_attention_layers
        q_heads = nq / tp * (2 if model.attn_output_gate else 1)  # the output gate doubles the query projection
        qkv_n = (q_heads + 2 * kv_heads) * model.head_dim
        out.append(Linear("qkv_proj", "attention", h, qkv_n, L, "dense", "tokens"))
        out.append(Linear("o_proj", "attention", nq / tp * model.head_dim, h, L, "dense", "tokens"))
    if model.linear_attention:
        la, Ll = model.linear_attention, model.num_linear_layers
        in_n = (2 * la.key_dim + 2 * la.value_dim + 2 * la.num_value_heads) / tp  # q, k, v, gate z, beta, alpha
        out.append(Linear("linear_in_proj", "attention", h, in_n, Ll, "dense", "tokens"))
        out.append(Linear("linear_out_proj", "attention", la.value_dim / tp, h, Ll, "dense", "tokens"))
    dense_layers = model.num_dense_ffn_layers
    if dense_layers:
        inter = model.intermediate_size / tp
        mats_up = 2 if model.gated_ffn else 1
        out.append(Linear("gate_up_proj", "ffn", h, mats_up * inter, dense_layers, "dense", "tokens"))
        out.append(Linear("down_proj", "ffn", inter, h, dense_layers, "dense", "tokens"))
    if model.moe:
        out.extend(_moe_linears(model, tp, ep, attention_dp))
    out.append(Linear("lm_head", "lm_head", h, model.vocab_size / tp, 1, "embedding", "samples"))
    return out


def _mla_linears(model: ModelSpec, tp: int) -> list[Linear]:
    """Multi-head latent attention matrices on one rank (the latent down-projections replicated), with DSA's
    indexer projections where the model has sparse attention."""
    assert model.mla is not None
    m, h, nq = model.mla, model.hidden_size, model.num_attention_heads
    L = model.num_attention_layers  # layers with softmax attention (all but the linear-attention ones)
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    out: list[Linear] = []
    kv_a = m.kv_lora_rank + m.qk_rope_head_dim
    if m.q_lora_rank:
        # the q and kv down-projections share their input: one GEMM in every engine (vLLM fused_qkv_a_proj and
        # SGLang fused_qkv_a_proj_with_mqa, models/deepseek_v2.py; TensorRT-LLM's MLA kv_a_proj_with_mqa holds both)
        out.append(Linear("qkv_a_proj", "attention", h, m.q_lora_rank + kv_a, L, "dense", "tokens", replicated=True))
        out.append(Linear("q_b_proj", "attention", m.q_lora_rank, nq / tp * qk, L, "dense", "tokens"))
    else:
        out.append(Linear("q_proj", "attention", h, nq / tp * qk, L, "dense", "tokens"))
        out.append(Linear("kv_a_proj", "attention", h, kv_a, L, "dense", "tokens", replicated=True))
    kv_b_n = nq / tp * (m.qk_nope_head_dim + m.v_head_dim)
    out.append(Linear("kv_b_proj", "attention", m.kv_lora_rank, kv_b_n, L, "dense", "tokens"))
    out.append(Linear("o_proj", "attention", nq / tp * m.v_head_dim, h, L, "dense", "tokens"))
    if model.sparse_attention:
        sa = model.sparse_attention
        q_in = m.q_lora_rank or h
        heads = sa.index_n_heads * sa.index_head_dim
        k_n = sa.index_head_dim + sa.index_n_heads
        out.append(Linear("indexer_q_proj", "attention", q_in, heads, L, "dense", "tokens", replicated=True))
        out.append(Linear("indexer_k_proj", "attention", h, k_n, L, "dense", "tokens", replicated=True))
    return out


def _moe_linears(model: ModelSpec, tp: int, ep: int, attention_dp: int) -> list[Linear]:
    """The router (replicated), this rank's routed experts (``ep``-way, each ``tp * attention_dp / ep``-way) and
    the shared experts (``tp``-way)."""
    assert model.moe is not None
    moe, moe_layers, h = model.moe, model.num_moe_layers, model.hidden_size
    mats_up = 2 if model.gated_ffn else 1
    out = [Linear("router", "moe", h, moe.num_experts, moe_layers, "dense", "tokens", replicated=True)]
    width = moe.expert_intermediate_size / (tp * attention_dp // ep)
    local = moe.num_experts // ep
    out.append(
        Linear("experts_gate_up", "moe", h, mats_up * width, moe_layers, "expert", "expert_tokens", experts=local)
    )
    out.append(Linear("experts_down", "moe", width, h, moe_layers, "expert", "expert_tokens", experts=local))
    if moe.num_shared_experts:
        shared = moe.num_shared_experts * moe.shared_size / tp
        out.append(Linear("shared_gate_up", "moe", h, mats_up * shared, moe_layers, "dense", "tokens"))
        out.append(Linear("shared_down", "moe", shared, h, moe_layers, "dense", "tokens"))
    return out


def _compressed_attention_linears(model: ModelSpec, tp: int) -> list[Linear]:
    """DeepSeek-V4 attention matrices on one rank (:class:`~infercast.specs.model.CompressedAttentionSpec`).

    The grouped output projection (``o_groups`` block-diagonal matrices of heads/groups x head_dim -> o_lora_rank)
    is one Linear of this rank's heads x head_dim -> o_lora_rank: weights and FLOPs exact, its output activation
    counted as one group's o_lora_rank wide. The compressors' wkv/wgate and the indexer's weights_proj and
    compressor are one Linear per layer kind (CSA, HCA); the hyper-connection mixes (attention and FFN sites) one
    GEMV of hc_mult x hidden -> 2 (2 + hc_mult) hc_mult per layer."""
    ca, h, hd, L = model.compressed_attention, model.hidden_size, model.head_dim, model.num_layers
    assert ca is not None  # the caller dispatches here only for compressed-attention models
    nq_r = model.num_attention_heads / tp
    out = [
        Linear("q_a_proj", "attention", h, ca.q_lora_rank, L, "dense", "tokens", replicated=True),
        Linear("q_b_proj", "attention", ca.q_lora_rank, nq_r * hd, L, "dense", "tokens"),
        Linear("kv_proj", "attention", h, hd, L, "dense", "tokens", replicated=True),
        Linear("o_a_proj", "attention", nq_r * hd, ca.o_lora_rank, L, "dense", "tokens"),
        Linear("o_b_proj", "attention", ca.o_groups / tp * ca.o_lora_rank, h, L, "dense", "tokens"),
    ]
    csa, hca = ca.csa_layers, len(ca.hca_ratios)
    if csa:
        c = ca.coff(ca.indexer_ratio)
        di, ni = ca.index_head_dim, ca.index_n_heads
        out.append(Linear("csa_compressor_proj", "attention", h, 2 * c * hd, csa, "dense", "tokens", replicated=True))
        out.append(
            Linear("indexer_q_proj", "attention", ca.q_lora_rank, ni * di, csa, "dense", "tokens", replicated=True)
        )
        out.append(Linear("indexer_k_proj", "attention", h, 2 * c * di + ni, csa, "dense", "tokens", replicated=True))
    if hca:
        out.append(Linear("hca_compressor_proj", "attention", h, 2 * hd, hca, "dense", "tokens", replicated=True))
    mix = (2 + ca.hc_mult) * ca.hc_mult
    out.append(Linear("hc_mix", "hyper_connections", ca.hc_mult * h, 2 * mix, L, "dense", "tokens", replicated=True))
    return out


def norm_elements(model: ModelSpec) -> float:
    """Norm weights (and qk-norms, sink logits, the small per-layer vectors of linear-attention layers): small and
    replicated on every rank."""
    La = model.num_attention_layers
    extra = La * (2 * model.head_dim if model.qk_norm else 0)
    extra += La * (model.num_attention_heads if model.attention_sinks else 0)
    if model.mla:
        extra += La * (model.mla.kv_lora_rank + (model.mla.q_lora_rank or 0))
    if model.sparse_attention:
        extra += La * 2 * model.sparse_attention.index_head_dim  # indexer key LayerNorm (weight and bias)
    ca = model.compressed_attention
    if ca:
        # q/kv RMSNorms, hyper-connection bases and scales, the final hyper-connection head; per compressed layer
        # the compressor's position bias and norm (and the CSA indexer compressor's)
        mix = (2 + ca.hc_mult) * ca.hc_mult
        extra += La * (ca.q_lora_rank + model.head_dim + 2 * (mix + 3))
        extra += ca.hc_mult * (ca.hc_mult * model.hidden_size + 1) + 1
        for r in ca.compressed_ratios:
            c = ca.coff(r)
            extra += r * c * model.head_dim + model.head_dim
            if r == ca.indexer_ratio:
                extra += r * c * ca.index_head_dim + ca.index_head_dim
    if model.linear_attention:
        la = model.linear_attention
        # depthwise conv taps, dt bias and A_log per value head, gated RMSNorm over the value head dim
        extra += la.num_layers * ((2 * la.key_dim + la.value_dim) * la.conv_kernel + 2 * la.num_value_heads)
        extra += la.num_layers * la.value_head_dim
    return model.norm_params + extra
