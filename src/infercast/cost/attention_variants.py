"""Operator rows of the 2026 attention kinds: the DSA indexer and gated-DeltaNet linear attention.

Additive to :func:`infercast.cost.operators.build_op_table` (same linear-coefficient form, same features).
What is exact and what is approximated:

- **DSA (DeepSeek-V3.2, GLM-5).** The main MLA attention of every layer reads at most ``index_topk`` cached
  tokens per query: it is priced by the window features with W = top-k (exact token counts, as if the chosen
  tokens were contiguous; the gather of scattered tokens is not priced apart). The indexer scores *every*
  cached token with ``index_n_heads`` heads of ``index_head_dim`` at the fp8 tensor-core rate (DeepGEMM's fp8
  MQA logits) and reads fp8 keys plus an fp32 scale per token; the top-k selection is priced as one write and
  one read of fp32 scores per (query, key) pair. The KV cache keeps every token (memory is not windowed).
- **Gated DeltaNet (Qwen3-Next, Qwen3.5).** No KV cache: a (d_k x d_v) state per value head and a
  (kernel - 1)-token convolution window per sequence and layer, read and written once per decode step and
  once per prefill chunk. Decode is the recurrent update (about 6 d_k d_v FLOPs per head per token: decay,
  S k, rank-1 update, S^T q) on CUDA cores; prefill is the chunked algorithm (chunk 64 as in
  flash-linear-attention's ``chunk_gated_delta_rule``): 4 d_k d_v for the inter-chunk state terms plus
  2 C (2 d_k + 2 d_v) for the intra-chunk products per head per token, on tensor cores. Kernel counts (4 per
  layer: conv, gating, the delta-rule kernel, gated norm) are priors, not measured.
"""

from __future__ import annotations

from infercast.cost.batch import F
from infercast.cost.operators import OpRow
from infercast.specs.deployment import Deployment
from infercast.specs.model import INDEXER_KEY_SCALE_BYTES

GDN_CHUNK = 64
"""Chunk length of the chunked gated-delta-rule prefill kernel (flash-linear-attention ``chunk_gated_delta_rule``,
used by vLLM and SGLang for Qwen3-Next/Qwen3.5)."""

GDN_KERNELS_PER_LAYER = 4
"""Prior: causal conv1d, gating, the delta-rule kernel and the gated RMSNorm per linear-attention layer."""

DSA_KERNELS_PER_LAYER = 3
"""Prior: indexer key write, fp8 logits, top-k selection per layer and phase."""

SCORE_BYTES = 4
"""fp32 indexer score per (query, key) pair, written by the logits kernel and read by the top-k kernel."""


def attention_variant_rows(dep: Deployment) -> list[OpRow]:
    """The extra operator rows ``dep``'s model needs (none for plain MHA/GQA/MLA/sliding models)."""
    return _dsa_indexer_rows(dep) + _linear_attention_rows(dep)


def _dsa_indexer_rows(dep: Deployment) -> list[OpRow]:
    m = dep.model
    sa = m.sparse_attention
    if not sa:
        return []
    La = m.num_attention_layers
    act = dep.scheme.activation_format.bytes_per_element
    key = "fp8" if "fp8" in dep.hardware.peak_flops else dep.attention_key
    heads_dim = sa.index_n_heads * sa.index_head_dim  # the indexer is replicated: every rank scores all heads
    key_bytes = sa.index_head_dim + INDEXER_KEY_SCALE_BYTES
    per_pair_flops = 2 * heads_dim + 2 * sa.index_n_heads  # q.k per head, then the weighted sum over heads
    rows = []
    for phase, pairs, kv, tokens in (
        ("prefill", "prefill_pairs", "prefill_kv", "prefill_tokens"),
        ("decode", "decode_kv", "decode_kv", "decode_tokens"),
    ):
        row = OpRow(
            f"dsa_indexer_{phase}", "attention", "attention", key, kernels=DSA_KERNELS_PER_LAYER * La,
            active=F[tokens], bandwidth="attn_decode" if phase == "decode" else "hbm",
        )  # fmt: skip
        row.flops[F[pairs]] = per_pair_flops * La
        row.bytes[F[kv]] = key_bytes * La  # every cached key is scored
        row.bytes[F[pairs]] += 2 * SCORE_BYTES * La  # scores written, then read by the top-k selection
        row.bytes[F[tokens]] = (heads_dim * act + key_bytes) * La  # queries in, the new key written
        rows.append(row)
    return rows


def _linear_attention_rows(dep: Deployment) -> list[OpRow]:
    m, tp = dep.model, dep.tp
    la = m.linear_attention
    if not la:
        return []
    Ll = m.num_linear_layers
    act = dep.scheme.activation_format.bytes_per_element
    heads = la.num_value_heads / tp
    dk, dv = la.key_head_dim, la.value_head_dim
    state_bytes = la.state_elements_per_rank(tp) * act  # per layer and sequence; 16-bit state (vLLM default)
    # q, k, v, gate z in; output out (per token, this rank's heads)
    io_bytes = (2 * la.key_dim + 3 * la.value_dim) / tp * act

    pre = OpRow(
        "linear_attention_prefill", "attention", "attention", dep.attention_key,
        kernels=GDN_KERNELS_PER_LAYER * Ll, active=F["prefill_tokens"],
    )  # fmt: skip
    pre.flops[F["prefill_tokens"]] = Ll * heads * (4 * dk * dv + 2 * GDN_CHUNK * (2 * dk + 2 * dv))
    pre.bytes[F["prefill_tokens"]] = Ll * io_bytes
    pre.bytes[F["prefill_seqs"]] = Ll * 2 * state_bytes  # the state read at the chunk start, written at its end

    dec = OpRow(
        "linear_attention_decode", "attention", "elementwise", None,
        kernels=GDN_KERNELS_PER_LAYER * Ll, active=F["decode_tokens"],
    )  # fmt: skip
    dec.flops[F["decode_tokens"]] = Ll * heads * 6 * dk * dv
    dec.bytes[F["decode_tokens"]] = Ll * (io_bytes + 2 * state_bytes)  # one decode token = one sequence's state
    return [pre, dec]
