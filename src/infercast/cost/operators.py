"""The operator graph of one decoder step on one tensor-parallel rank, as linear coefficient tables.

For every operator (a kernel, or a group of identical kernels across layers) the table holds the
coefficients that turn a step's features (:mod:`infercast.cost.batch`) into FLOPs, bytes moved, and GEMM
rows. These counts are exact bookkeeping from the architecture and formats — no efficiencies here; those
are applied in :mod:`infercast.cost.step`.
"""

from __future__ import annotations

from dataclasses import dataclass

from infercast.cost.attention_variants import attention_variant_rows
from infercast.cost.batch import NUM_FEATURES, F
from infercast.cost.op_row import EXPERT_FRAC, OpRow
from infercast.cost.ring import ring_share, ring_steps
from infercast.specs.deployment import Deployment
from infercast.specs.precision import LOGIT_BYTES
from infercast.specs.sharding import rank_linears


@dataclass(frozen=True)
class OpTable:
    """All operators of a step for one deployment."""

    rows: list[OpRow]
    weight_bytes: float  # bytes of weights streamed when every expert is touched (per rank)
    moe_k_over_e: float  # k/E of the routed experts (0 for dense models)

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.rows]


def _collective(name: str, kind: str, ranks: int, calls: float, bytes_per_unit: float, feature: int) -> OpRow:
    """``calls`` collectives over ``ranks`` GPUs, each on a buffer of ``bytes_per_unit`` per unit of ``feature``.

    ``bytes`` holds what each rank sends over the links (the ring's 2(N-1)/N per byte reduced for an
    all-reduce, (N-1)/N for a gather or all-to-all), ``hops`` the ring steps of the fallback without a measured
    curve (2(N-1) for an all-reduce, N-1 for a gather or all-to-all, 1 for a send)."""
    op = OpRow(
        name,
        "communication",
        "comm",
        None,
        bandwidth="link",
        active=feature,
        collective=kind,
        ranks=ranks,
        calls=calls,
        kernels=calls,
    )
    op.message[feature] = bytes_per_unit
    share = 1.0 if kind == "p2p" else ring_share(kind, ranks)
    op.bytes[feature] = calls * share * bytes_per_unit
    op.hops = calls * ring_steps(kind, ranks)
    return op


def build_op_table(dep: Deployment) -> OpTable:
    """The per-rank operator list of one step for ``dep``: GEMMs, attention, norms, activations, the sampler
    and the collectives, in that order (the order fixes the sums' rounding)."""
    m = dep.model
    ops, weight_total = _linear_rows(dep)
    if not m.compressed_attention:  # DeepSeek-V4's compressed attention has its own rows (attention_variants.py)
        ops += _attention_rows(dep)
    # DSA indexer, linear-attention and compressed-attention rows (cost/attention_variants.py)
    ops.extend(attention_variant_rows(dep))
    ops.append(_norm_row(dep))
    ops += _activation_rows(dep)
    ops.append(_sampler_row(dep))
    ops += _collective_rows(dep)
    if dep.attention_dp > 1:
        _per_attention_dp_rank(ops, dep.attention_dp)
    if dep.pp > 1:
        ops.append(_pp_send_row(dep))
    k_over_e = m.moe.experts_per_token / m.moe.num_experts if m.moe else 0.0
    return OpTable(rows=ops, weight_bytes=weight_total, moe_k_over_e=k_over_e)


ROUTING_KERNELS = 3
"""vLLM fused_moe's kernels per MoE layer besides the router GEMM and the expert GEMMs: topk_softmax,
moe_align_block_size (sort tokens by expert) and moe_sum (weighted sum of the k expert outputs)."""


def _linear_rows(dep: Deployment) -> tuple[list[OpRow], float]:
    """GEMMs (and the embedding gather) from the shared per-rank layer list, and the weight bytes they stream."""
    m, tp, ep = dep.model, dep.tp, dep.ep
    act = dep.scheme.activation_format.bytes_per_element
    wbytes = {
        "dense": dep.scheme.weight_format.bytes_per_element,
        "expert": dep.scheme.expert_weight_format.bytes_per_element,
        "embedding": dep.scheme.embedding_format.bytes_per_element,
    }
    k_over_e = m.moe.experts_per_token / m.moe.num_experts if m.moe else 0.0
    k_over_ep = m.moe.experts_per_token / ep if m.moe else 0.0
    ops: list[OpRow] = []
    weight_total = 0.0
    for lin in rank_linears(m, tp, ep, dep.attention_dp):
        wb = wbytes[lin.weight_class]
        if lin.name == "embedding":
            op = OpRow("embedding", "embedding", "elementwise", None, kernels=1)
            op.bytes[F["tokens"]] = m.hidden_size * (wb + act)
            ops.append(op)
            continue
        key = dep.attention_key if lin.weight_class == "embedding" or lin.name == "router" else dep.compute_key
        op = OpRow(lin.name, lin.group, "gemm", key, kernels=lin.layers)
        weights = lin.k * lin.n * lin.experts * lin.layers * wb
        weight_total += weights
        if lin.rows == "expert_tokens":
            # tokens routed to this rank's experts: T·k/ep rows in all, T·k/E per expert on average
            op.flops[F["tokens"]] = 2 * lin.k * lin.n * lin.layers * k_over_ep
            op.bytes[EXPERT_FRAC] = weights
            op.bytes[F["tokens"]] = (lin.k + lin.n) * act * lin.layers * k_over_ep
            op.rows[F["tokens"]] = k_over_e
        else:
            feat = F["sampled"] if lin.rows == "samples" else F["tokens"]
            op.flops[feat] = 2 * lin.k * lin.n * lin.layers
            op.bytes[F["one"]] = weights
            op.bytes[feat] = (lin.k + lin.n) * act * lin.layers
            op.rows[feat] = 1.0
            op.active = feat
            op.act_in = lin.k * lin.layers
        if lin.name == "router":
            op.kernels += ROUTING_KERNELS * lin.layers
        ops.append(op)
    return ops, weight_total


def _attention_rows(dep: Deployment) -> list[OpRow]:
    """Softmax attention's prefill and decode kernels and the RoPE + KV-cache write, per rank.

    Linear-attention layers are priced by their own row; the windowed layers read at most attention_window
    keys: sliding/chunked layers, or every layer under DSA's top-k selection."""
    m, tp = dep.model, dep.tp
    act = dep.scheme.activation_format.bytes_per_element
    kvb = dep.kv_format.bytes_per_element
    La, Ls = m.num_attention_layers, m.num_window_read_layers
    Lf = La - Ls
    nq_r = m.num_attention_heads / tp
    if m.mla:
        ml = m.mla
        d_qk_pre, d_v_pre = ml.qk_nope_head_dim + ml.qk_rope_head_dim, ml.v_head_dim
        d_qk_dec, d_v_dec = ml.kv_lora_rank + ml.qk_rope_head_dim, ml.kv_lora_rank  # absorbed (latent) form
        kv_pre_per_tok = nq_r * (d_qk_pre + d_v_pre) * act  # K/V expanded from the latent for prefill
    else:
        d_qk_pre = d_v_pre = d_qk_dec = d_v_dec = m.head_dim
        kv_pre_per_tok = m.kv_elements_per_token_per_layer_per_rank(tp) * kvb
    kv_dec_per_tok = m.kv_elements_per_token_per_layer_per_rank(tp) * kvb

    pre = OpRow(
        "attention_prefill", "attention", "attention", dep.attention_key, kernels=La, active=F["prefill_tokens"]
    )
    per_pair = 2 * (d_qk_pre + d_v_pre) * nq_r
    pre.flops[F["prefill_pairs"]] = per_pair * Lf
    pre.flops[F["prefill_pairs_win"]] = per_pair * Ls
    pre.bytes[F["prefill_tokens"]] = nq_r * (d_qk_pre + d_v_pre) * act * La
    pre.bytes[F["prefill_kv"]] = kv_pre_per_tok * Lf
    pre.bytes[F["prefill_kv_win"]] = kv_pre_per_tok * Ls

    dec = OpRow(
        "attention_decode",
        "attention",
        "attention",
        dep.attention_key,
        kernels=La,
        active=F["decode_tokens"],
        bandwidth="attn_decode",
    )
    per_key = 2 * (d_qk_dec + d_v_dec) * nq_r
    dec.flops[F["decode_kv"]] = per_key * Lf
    dec.flops[F["decode_kv_win"]] = per_key * Ls
    dec.bytes[F["decode_tokens"]] = nq_r * (d_qk_dec + d_v_dec) * act * La
    dec.bytes[F["decode_kv"]] = kv_dec_per_tok * Lf
    dec.bytes[F["decode_kv_win"]] = kv_dec_per_tok * Ls
    return [pre, dec, _rope_row(dep)]


def _rope_row(dep: Deployment) -> OpRow:
    """Two kernels per layer, as vLLM runs them: rotary_embedding (q and k in place) and reshape_and_cache
    (write the new K/V into the paged cache)."""
    m, tp = dep.model, dep.tp
    act = dep.scheme.activation_format.bytes_per_element
    kvb = dep.kv_format.bytes_per_element
    La = m.num_attention_layers
    nq_r = m.num_attention_heads / tp
    rope = OpRow("rope_kv_write", "attention", "elementwise", None, kernels=2 * La)
    kv_heads = 1.0 if m.mla else m.kv_heads_per_rank(tp)
    rope_dim = m.mla.qk_rope_head_dim if m.mla else m.head_dim
    rope.bytes[F["tokens"]] = La * (
        2 * (nq_r + kv_heads) * rope_dim * act  # rotate q and k in place
        + m.kv_elements_per_token_per_layer_per_rank(tp) * (act + kvb)  # read new k/v, write the cache
    )
    # x·cos − y·sin per rotated element: 2 multiplies + 1 add (cos/sin come from a cached table)
    rope.flops[F["tokens"]] = La * 3 * (nq_r + kv_heads) * rope_dim
    return rope


def _norm_row(dep: Deployment) -> OpRow:
    """Norms (fused residual-add + RMSNorm: read input and residual, write both) and the final norm; with MLA the
    latents' RMSNorms (``q_a_layernorm``, ``kv_a_layernorm``: vLLM and SGLang models/deepseek_v2.py, TensorRT-LLM's
    MLA module). QK-norm's per-head norms are left out: counted, the calibration refit moves their time into the
    request overheads (docs/accuracy-notes.md, tenth pass)."""
    m = dep.model
    h, L = m.hidden_size, m.num_layers
    act = dep.scheme.activation_format.bytes_per_element
    norms = OpRow("norms", "norm", "elementwise", None, kernels=L * m.norms_per_layer + 1)
    norms.bytes[F["tokens"]] = (L * m.norms_per_layer * 4 + 2) * h * act
    # per element: residual add, square, accumulate, scale by rsqrt(mean), multiply by the weight
    norms.flops[F["tokens"]] = (L * m.norms_per_layer + 1) * 5 * h
    if m.mla:  # each latent, read and written
        La, width = m.num_attention_layers, m.mla.kv_lora_rank + (m.mla.q_lora_rank or 0)
        norms.kernels += La * (2 if m.mla.q_lora_rank else 1)
        norms.bytes[F["tokens"]] += La * 2 * width * act
        norms.flops[F["tokens"]] += La * 5 * width
    return norms


def _activation_rows(dep: Deployment) -> list[OpRow]:
    """The FFN activations (SiLU/GELU x up) of the dense layers and of the routed and shared experts."""
    m, tp, dp = dep.model, dep.tp, dep.attention_dp
    act = dep.scheme.activation_format.bytes_per_element
    up_mats = 3 if m.gated_ffn else 2
    ops = []
    if m.num_dense_ffn_layers:
        a = OpRow("ffn_activation", "ffn", "elementwise", None, kernels=m.num_dense_ffn_layers)
        a.bytes[F["tokens"]] = up_mats * (m.intermediate_size / tp) * act * m.num_dense_ffn_layers
        # act(gate) · up per output element: exp, add, divide (SiLU/GELU as ~3 ops) and the multiply (a plain
        # MLP has no multiply; its one fewer FLOP per element is left in, negligible next to the bytes)
        a.flops[F["tokens"]] = 4 * (m.intermediate_size / tp) * m.num_dense_ffn_layers
        ops.append(a)
    if m.moe:
        moe, Lm, h = m.moe, m.num_moe_layers, m.hidden_size
        k_over_ep = moe.experts_per_token / dep.ep
        width = moe.expert_intermediate_size / (tp * dp // dep.ep)  # GPUs sharing one expert
        a = OpRow("moe_activation", "moe", "elementwise", None, kernels=Lm)
        # activation of the routed rows (read gate/up, write the product), then the weighted sum of the
        # k expert outputs back into one row per token (of this attention-DP rank's tokens)
        a.bytes[F["tokens"]] = Lm * (k_over_ep * (up_mats * width + h) + h / dp) * act
        if moe.num_shared_experts:
            a.bytes[F["tokens"]] += Lm * up_mats * (moe.num_shared_experts * moe.shared_size / tp) * act / dp
        a.flops[F["tokens"]] = Lm * k_over_ep * 4 * width  # 4 per element, as the dense activation
        ops.append(a)
    return ops


def _sampler_row(dep: Deployment) -> OpRow:
    """The sampler: float32 logits of the sampled tokens (softmax, top-k/p).

    Four kernels (upcast + temperature, softmax, top-k/top-p filter, sample) and three passes over the float32
    logits (write the upcast, read for softmax, read the probabilities to sample), as in vLLM's Sampler; 5 FLOPs
    per logit: scale, max-subtract, exp, sum, normalise. Bookkeeping priors, not measured."""
    vocab = dep.model.vocab_size
    sampler = OpRow("sampler", "lm_head", "elementwise", None, kernels=4, active=F["sampled"])
    sampler.bytes[F["sampled"]] = 3 * vocab * LOGIT_BYTES
    sampler.flops[F["sampled"]] = 5 * vocab
    return sampler


def _collective_rows(dep: Deployment) -> list[OpRow]:
    """The TP all-reduces and logits gather, and the expert all-reduce and all-to-alls of dispatched MoE.

    Expert parallelism without attention DP spans the TP group, whose ranks all hold every token: each rank runs
    its experts on the tokens routed to them and the TP all-reduce after the layer combines the partial outputs
    (vLLM's --enable-expert-parallel at data-parallel size 1, SGLang --ep without DP attention, TensorRT-LLM's
    moe_ep_size without attention DP): nothing is dispatched. With attention DP the ranks hold different
    tokens, so they are dispatched to their experts' ranks and combined back by two all-to-alls (DeepEP)."""
    m, tp, ep, dp = dep.model, dep.tp, dep.ep, dep.attention_dp
    h, L, act = m.hidden_size, m.num_layers, dep.scheme.activation_format.bytes_per_element
    expert_tp = tp * dp // ep  # GPUs sharing one expert
    dispatched = bool(m.moe) and ep > 1 and dp > 1
    ops = []
    if tp > 1:
        count = 2 * L + 1  # after attention and after the FFN in every layer, plus the vocab-parallel embedding
        if dispatched:
            count -= m.num_moe_layers  # the MoE output is combined by the all-to-all (and an expert-TP reduce)
        ops.append(_collective("tp_allreduce", "all_reduce", tp, count, h * act, F["tokens"]))
        # logits of the sampled tokens gathered from the vocab shards (the buffer is the gathered result)
        ops.append(_collective("logits_gather", "all_gather", tp, 1, m.vocab_size * act, F["sampled"]))
    if dispatched and expert_tp > 1:
        ops.append(_collective("expert_allreduce", "all_reduce", expert_tp, m.num_moe_layers, h * act, F["tokens"]))
    if dispatched:
        # dispatch tokens to the ranks owning their experts and combine the results back: two all-to-alls per
        # MoE layer, each rank's buffer holding its tokens' k expert copies
        assert m.moe is not None  # dispatched implies an MoE model
        msg = m.moe.experts_per_token * h * act
        ops.append(_collective("ep_all_to_all", "alltoall", ep, 2 * m.num_moe_layers, msg, F["tokens"]))
    return ops


def _pp_send_row(dep: Deployment) -> OpRow:
    """Activations handed from stage to stage (pp - 1 sends per micro-batch), over the scale-out network when
    the replica spans nodes."""
    act = dep.scheme.activation_format.bytes_per_element
    send = _collective("pp_send", "p2p", 2, dep.pp - 1, dep.model.hidden_size * act, F["tokens"])
    if dep.gpus > dep.hardware.max_gpus_per_node:
        send.bandwidth = "network"
    return send


EXPERT_ROWS = ("experts_gate_up", "experts_down", "moe_activation")
"""Operators whose work follows the tokens routed to a rank's experts (from every attention-DP rank)."""


def _per_attention_dp_rank(ops: list[OpRow], dp: int) -> None:
    """Attention DP: a rank runs attention, dense layers, norms, sampling and its collectives for 1/dp of the
    step's tokens and sequences (balanced), while its experts see tokens from every rank: scale the token-driven
    coefficients of every operator but the expert ones (whose own formulas already count per rank)."""
    token_cols = [i for i in range(NUM_FEATURES) if i != F["one"]]
    for op in ops:
        if op.name in EXPERT_ROWS:
            continue
        for arr in (op.flops, op.bytes, op.rows, op.message):
            arr[token_cols] /= dp
