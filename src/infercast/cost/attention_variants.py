"""Operator rows of the 2026 attention kinds: the DSA indexer, gated-DeltaNet linear attention and DeepSeek-V4's
compressed attention.

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
  2 C (2 d_k + 2 d_v) for the intra-chunk products per head per token, on tensor cores. The kernel runs a
  sequence's chunks in series: where the kernel tables were imported, the step model (cost/step.py) floors the
  prefill row at the measured time per chunk and prices its FLOPs at the kernel's own efficiency. Kernel counts
  (4 per layer: conv, gating, the delta-rule kernel, gated norm) are priors, not measured.
- **Compressed attention (DeepSeek-V4).** Every query of every layer reads the window's raw entries, priced as a
  full ``window`` entries (an upper bound while the context is shorter), plus compressed entries: on CSA layers
  min(ceil(ctx / r), top-k), priced with the window features at W = r x top-k divided by r (ceil dropped; the
  chosen entries priced as contiguous, as DSA's); on HCA layers all ctx / r, the full-context features divided by
  r. One shared K=V entry of head_dim serves every head (per (query, entry) pair 2 x 2 x head_dim FLOPs per head;
  one read per entry for all heads, as FlashMLA's sparse kernel). The CSA indexer is DSA's over the compressed keys
  (every causal (query, compressed key) pair scored). Each compressor writes its projected kv and gate scores to
  fp32 state and reads them back once when a group is pooled (the pooling's softmax-weighted sum as 4 FLOPs per
  value). Hyper-connections: per layer two mixes, each a GEMV over the ``hc_mult`` copies (the ``hc_mix`` linear,
  fused with the pre kernel that writes the mixed input) and a post kernel that reads the copies with the new
  output and writes them back. Kernel counts are priors, not measured.
"""

from __future__ import annotations

from typing import Any

from infercast.cost.batch import F
from infercast.cost.op_row import OpRow
from infercast.specs.deployment import Deployment
from infercast.specs.model import COMPRESSOR_STATE_BYTES, INDEXER_KEY_SCALE_BYTES

GDN_CHUNK = 64
"""Chunk length of the chunked gated-delta-rule prefill kernel (flash-linear-attention ``chunk_gated_delta_rule``,
used by vLLM and SGLang for Qwen3-Next/Qwen3.5)."""

GDN_KERNELS_PER_LAYER = 4
"""Prior: causal conv1d, gating, the delta-rule kernel and the gated RMSNorm per linear-attention layer."""

DSA_KERNELS_PER_LAYER = 3
"""Prior: indexer key write, fp8 logits, top-k selection per layer and phase."""

SCORE_BYTES = 4
"""fp32 indexer score per (query, key) pair, written by the logits kernel and read by the top-k kernel."""

POOL_FLOPS_PER_VALUE = 4
"""Compressor pooling per projected value: add the position bias, exp of the gate score, multiply, accumulate."""

HC_KERNELS_PER_SITE = 2
"""Prior: hyper-connection pre (mix weights, Sinkhorn, weighted sum of the copies) and post kernels per site."""


def attention_variant_rows(dep: Deployment) -> list[OpRow]:
    """The extra operator rows ``dep``'s model needs (none for plain MHA/GQA/MLA/sliding models)."""
    return _dsa_indexer_rows(dep) + _linear_attention_rows(dep) + _compressed_attention_rows(dep)


def _dsa_indexer_rows(dep: Deployment) -> list[OpRow]:
    m = dep.model
    sa = m.sparse_attention
    if not sa:
        return []
    La = m.num_attention_layers
    act = dep.scheme.activation_format.bytes_per_element
    # every cached key scored; per token the queries read and the new key written
    token_bytes = (sa.index_n_heads * sa.index_head_dim * act + sa.index_head_dim + INDEXER_KEY_SCALE_BYTES) * La
    return indexer_rows(
        dep,
        "dsa_indexer",
        La,
        float(La),
        sa.index_n_heads,
        sa.index_head_dim,
        sa.index_head_dim + INDEXER_KEY_SCALE_BYTES,
        token_bytes,
    )


def indexer_rows(
    dep: Deployment,
    name: str,
    layers: int,
    keys_per_token: float,
    n_heads: int,
    head_dim: int,
    key_bytes: float,
    token_bytes: float,
) -> list[OpRow]:
    """A lightning indexer's prefill and decode rows (DSA, DeepSeek-V4's CSA): ``n_heads`` x ``head_dim`` fp8
    dot products per scored key, replicated on every rank, ``keys_per_token`` scored keys per (query, cached
    token) pair summed over the layers (the layer count, or with compressed keys their 1/r weights); each key
    read once (``key_bytes``) and its fp32 score written and read back by the top-k selection;
    ``token_bytes`` per new token (queries in, and the new key where this row writes it)."""
    key = "fp8" if "fp8" in dep.hardware.peak_flops else dep.attention_key
    per_key_flops = 2 * n_heads * head_dim + 2 * n_heads  # q.k per head, then the weighted sum over heads
    rows = []
    for phase, pairs, kv, tokens in (
        ("prefill", "prefill_pairs", "prefill_kv", "prefill_tokens"),
        ("decode", "decode_kv", "decode_kv", "decode_tokens"),
    ):
        row = OpRow(
            f"{name}_{phase}",
            "attention",
            "attention",
            key,
            kernels=DSA_KERNELS_PER_LAYER * layers,
            active=F[tokens],
            bandwidth="attn_decode" if phase == "decode" else "hbm",
        )
        row.flops[F[pairs]] = per_key_flops * keys_per_token
        row.bytes[F[kv]] = key_bytes * keys_per_token
        row.bytes[F[pairs]] += 2 * SCORE_BYTES * keys_per_token
        row.bytes[F[tokens]] = token_bytes
        rows.append(row)
    return rows


def gdn_prefill_flops(dk: Any, dv: Any) -> Any:
    """FLOPs of the chunked gated-delta-rule prefill per token and value head: 4·dk·dv for the inter-chunk state
    terms plus 2·C·(2·dk + 2·dv) for the intra-chunk products (C = :data:`GDN_CHUNK`); also what the kernel fit
    (calibrate/kernel_fit.py) divides the measured times by."""
    return 4 * dk * dv + 2 * GDN_CHUNK * (2 * dk + 2 * dv)


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
        "linear_attention_prefill",
        "attention",
        "attention",
        dep.attention_key,
        kernels=GDN_KERNELS_PER_LAYER * Ll,
        active=F["prefill_tokens"],
    )
    pre.flops[F["prefill_tokens"]] = Ll * heads * gdn_prefill_flops(dk, dv)
    pre.bytes[F["prefill_tokens"]] = Ll * io_bytes
    pre.bytes[F["prefill_seqs"]] = Ll * 2 * state_bytes  # the state read at the chunk start, written at its end

    dec = OpRow(
        "linear_attention_decode",
        "attention",
        "elementwise",
        None,
        kernels=GDN_KERNELS_PER_LAYER * Ll,
        active=F["decode_tokens"],
    )
    dec.flops[F["decode_tokens"]] = Ll * heads * 6 * dk * dv
    dec.bytes[F["decode_tokens"]] = Ll * (io_bytes + 2 * state_bytes)  # one decode token = one sequence's state
    return [pre, dec]


def _compressed_attention_rows(dep: Deployment) -> list[OpRow]:
    """DeepSeek-V4: main attention (window + compressed entries), RoPE and cache writes, compressors, the CSA
    indexer and hyper-connection mixing (see module docstring)."""
    m, tp = dep.model, dep.tp
    ca = m.compressed_attention
    if not ca:
        return []
    act = dep.scheme.activation_format.bytes_per_element
    kvb = dep.kv_format.bytes_per_element
    L, d, h, W = m.num_layers, m.head_dim, m.hidden_size, ca.window
    nq_r = m.num_attention_heads / tp
    entry = d * kvb
    csa = ca.csa_layers / ca.indexer_ratio  # CSA layers x entries per token read, on the r x top-k window features
    hca = sum(1 / r for r in ca.hca_ratios)  # HCA layers x entries per token, on the full-context features
    per_pair = 2 * (d + d) * nq_r  # q.k over head_dim, then p.v over head_dim, per local head
    q_io = nq_r * 2 * d * act * L  # queries in, outputs out
    rows = []

    pre = OpRow("attention_prefill", "attention", "attention", dep.attention_key, kernels=L, active=F["prefill_tokens"])
    pre.flops[F["prefill_tokens"]] = per_pair * W * L
    pre.flops[F["prefill_pairs_win"]] = per_pair * csa
    pre.flops[F["prefill_pairs"]] = per_pair * hca
    pre.bytes[F["prefill_tokens"]] = q_io + entry * L  # the chunk's own raw entries
    pre.bytes[F["prefill_seqs"]] = entry * W * L  # the cached window before the chunk
    pre.bytes[F["prefill_kv_win"]] = entry * csa
    pre.bytes[F["prefill_kv"]] = entry * hca
    rows.append(pre)

    dec = OpRow(
        "attention_decode",
        "attention",
        "attention",
        dep.attention_key,
        kernels=L,
        active=F["decode_tokens"],
        bandwidth="attn_decode",
    )
    dec.flops[F["decode_tokens"]] = per_pair * W * L
    dec.flops[F["decode_kv_win"]] = per_pair * csa
    dec.flops[F["decode_kv"]] = per_pair * hca
    dec.bytes[F["decode_tokens"]] = q_io + entry * W * L
    dec.bytes[F["decode_kv_win"]] = entry * csa
    dec.bytes[F["decode_kv"]] = entry * hca
    rows.append(dec)

    # rotate the rope dims of q and of the new entry, write the entry into the window cache (2 kernels per layer)
    rope = OpRow("rope_kv_write", "attention", "elementwise", None, kernels=2 * L)
    rope.bytes[F["tokens"]] = L * (2 * (nq_r + 1) * ca.qk_rope_head_dim * act + d * (act + kvb))
    rope.flops[F["tokens"]] = L * 3 * (nq_r + 1) * ca.qk_rope_head_dim
    rows.append(rope)

    # compressors: every token's projected kv and gate (coff x dim each, fp32) into the state and back once when
    # pooled; one pooled entry (and indexer key) written per r tokens
    comp = OpRow("kv_compressor", "attention", "elementwise", None, kernels=len(ca.compressed_ratios))
    for r in ca.compressed_ratios:
        c = ca.coff(r)
        dims = c * d + (c * ca.index_head_dim if r == ca.indexer_ratio else 0)
        comp.bytes[F["tokens"]] += 2 * 2 * dims * COMPRESSOR_STATE_BYTES + (entry + m.compressed_indexer_bytes(r)) / r
        comp.flops[F["tokens"]] += POOL_FLOPS_PER_VALUE * dims
    rows.append(comp)

    if ca.csa_layers:
        Lc, ni, di = ca.csa_layers, ca.index_n_heads, ca.index_head_dim
        rows += indexer_rows(dep, "csa_indexer", Lc, csa, ni, di, ca.indexer_key_bytes, ni * di * act * Lc)

    hc = ca.hc_mult
    mix = OpRow("hyper_connections", "hyper_connections", "elementwise", None, kernels=2 * HC_KERNELS_PER_SITE * L)
    # per site: pre writes the mixed input (it reads the hc copies with the hc_mix GEMV, fused as in the reference);
    # post reads the output and the hc copies and writes hc copies
    mix.bytes[F["tokens"]] = 2 * L * (2 * hc + 2) * h * act
    # pre: weighted sum (2 hc per element); post: scale the output (hc) and mix the copies (2 hc^2)
    mix.flops[F["tokens"]] = 2 * L * (3 * hc + 2 * hc * hc) * h
    rows.append(mix)
    return rows
