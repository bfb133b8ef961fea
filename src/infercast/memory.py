"""Memory budget of one GPU of a serving replica: weights, KV cache, activations, runtime reservations.

Answers the capacity-planning questions: does it fit (and by how much), how many sequences of a context fit,
how much context each of C sequences can have, and how many paged KV blocks the engine gets. The KV pool is
reserved as the engines do it (``specs/data/engines.yaml``): vLLM/SGLang take a fraction of *total* memory
and subtract everything else; TensorRT-LLM takes a fraction of what is *free* after loading.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from infercast.cost.cache import SpecCache, spec_key
from infercast.errors import DoesNotFitError, InfercastError, require_fraction, require_positive_int
from infercast.specs.deployment import Deployment
from infercast.specs.engine import EngineSpec
from infercast.specs.model import ModelSpec
from infercast.specs.precision import LOGIT_BYTES, PrecisionScheme
from infercast.specs.sharding import norm_elements, rank_linears


def kv_layer_groups(num_layers: int, num_sliding_layers: int) -> tuple[int, int]:
    """(full, sliding): layer groups of each kind when ``num_layers`` attention layers, ``num_sliding_layers`` of
    them windowed, are split into groups of gcd(full, sliding) layers, the page unit of a hybrid KV allocator
    (vLLM's groups layers by a common size too; for counts like 52 windowed + 10 full its grouping, with padding,
    may differ: same bytes, other block granularity).

    A KV block holds ``block_size`` tokens of one group; without sliding layers one group is every layer (1, 0),
    so a block is the all-layer block of a uniform model."""
    if not num_sliding_layers:
        return 1, 0
    full = num_layers - num_sliding_layers
    group = math.gcd(full, num_sliding_layers)
    return full // group, num_sliding_layers // group


def kv_blocks_per_sequence(
    context: int | np.ndarray,
    block_size: int,
    sliding_window: int | None = None,
    num_layers: int = 1,
    num_sliding_layers: int = 0,
    state_blocks: int = 0,
) -> int | np.ndarray:
    """KV blocks one sequence of ``context`` tokens occupies in the engine's pool.

    Full-attention layers hold every token and sliding-window layers only the last ``sliding_window``. With
    sliding layers a block spans one layer group (:func:`kv_layer_groups`), so a sequence holds
    full_groups x ceil(context / block) + sliding_groups x ceil(min(context, window) / block) blocks (the
    simulator's ledger counts the same). An engine that frees a windowed group's blocks only once they lie
    wholly before the window may hold one block more per windowed group (gpt-oss-120b at 8k: ~0.2 %). ``state_blocks``:
    blocks a sequence's fixed linear-attention state takes (vLLM's hybrid allocator gives that state pages of
    the attention page size). Exact for a Python int and for a NumPy array of whole numbers alike, so the
    memory budget (one context) and ``sweep`` (every configuration at once) get the same counts.
    """
    full = _ceil_div(context, block_size)
    if not sliding_window or not num_sliding_layers:
        return full + state_blocks
    capped = np.minimum(context, sliding_window) if isinstance(context, np.ndarray) else min(context, sliding_window)
    full_groups, sliding_groups = kv_layer_groups(num_layers, num_sliding_layers)
    return full * full_groups + _ceil_div(capped, block_size) * sliding_groups + state_blocks


def _ceil_div(a: int | np.ndarray, b: int) -> int | np.ndarray:
    """ceil(a / b) for whole numbers: integer arithmetic for ints; for arrays ceil of the float quotient, which
    is exact while a < 2**53 and b < 2**26 (a non-integer quotient is at least 1/b away from an integer)."""
    if isinstance(a, np.ndarray):
        return np.ceil(a / b)
    return -(-a // b)


@dataclass(frozen=True)
class MemoryBudget:
    """Per-GPU memory accounting for a model on a TP(/EP) replica. All sizes in bytes (SI)."""

    model_id: str
    gpu_id: str
    tp: int
    ep: int
    precision: str
    kv_precision: str
    engine: str
    capacity_bytes: float
    """Memory one GPU exposes to the engine (``MemorySpec.usable``: the driver's figure where recorded)."""
    weights_bytes: float
    weights_breakdown: dict[str, float]
    kv_bytes_per_token: float
    """KV bytes one token adds on this GPU while within every sliding window."""
    activation_bytes: float
    """Peak activation workspace at the engine's token budget (prior estimate)."""
    runtime_overhead_bytes: float
    """CUDA context, CUDA-graph pools, communication buffers (engine priors)."""
    kv_pool_bytes: float
    """KV cache pool after the engine's reservation policy, rounded down to whole blocks (>= 0)."""
    block_size: int
    block_bytes: float
    """Bytes of one KV block: ``block_size`` tokens of every attention layer, or of one layer group on models with
    sliding-window layers (:func:`kv_layer_groups`)."""
    num_blocks: int
    """KV blocks (of :attr:`block_bytes`) the pool holds."""
    context: int | None = None
    concurrency: int | None = None
    kv_cache_bytes: float = 0.0
    """KV bytes the requested context x concurrency needs on this GPU."""
    notes: list[str] = field(default_factory=list)
    state_bytes_per_sequence: float = 0.0
    """Fixed linear-attention state (recurrent state + conv window) one sequence holds on this GPU; for compressed
    attention (DeepSeek-V4) the window entries, partial compressed entries and compressor state."""
    state_blocks_per_sequence: int = 0
    """KV blocks that state takes in the pool (0 without linear-attention layers)."""
    unreserved_bytes: float = 0.0
    """What the engine's fraction leaves for KV after weights, activations and runtime (before block rounding);
    negative when those reservations alone do not fit (then the KV pool is 0)."""
    layout: str = ""
    """The replica's parallel layout (``Deployment.layout``: ``tp4``, ``tp1-dp8-ep8``, ``tp8-pp2``)."""
    _sliding_window: int | None = None
    _model_max_context: int | None = None
    _num_layers: int = 1
    _num_sliding_layers: int = 0

    @property
    def total_bytes(self) -> float:
        """Weights + KV for the request + activations + runtime reservations."""
        return self.weights_bytes + self.kv_cache_bytes + self.activation_bytes + self.runtime_overhead_bytes

    @property
    def weights_fit(self) -> bool:
        return self.kv_pool_bytes > 0 and self.num_blocks > 0

    @property
    def fits(self) -> bool:
        """Weights fit and the requested context x concurrency fits in the KV pool."""
        return self.weights_fit and self.required_blocks <= self.num_blocks

    @property
    def sequences(self) -> int:
        """Sequences of the requested load: ``concurrency``, one when none was given."""
        return 1 if self.concurrency is None else self.concurrency

    @property
    def required_blocks(self) -> int:
        """KV blocks the requested load holds: :attr:`sequences` of ``context`` tokens each (of one token when no
        context was given: every sequence holds at least its first block)."""
        return self.blocks_per_sequence(1 if self.context is None else self.context) * self.sequences

    @property
    def shortfall_bytes(self) -> float:
        """Extra bytes per GPU the configuration needs to fit (0 when it fits)."""
        if self.fits:
            return 0.0
        need = self.required_blocks * self.block_bytes
        if not self.weights_fit:
            need = max(need, self.block_bytes)
        return need - min(self.kv_pool_bytes, self.unreserved_bytes)

    @property
    def layer_groups(self) -> tuple[int, int]:
        """(full, sliding) layer groups a KV block is one of (:func:`kv_layer_groups`; (1, 0) without windows)."""
        return kv_layer_groups(self._num_layers, self._num_sliding_layers)

    @property
    def layers_per_block(self) -> int:
        """Attention layers one KV block spans: all of them, or one layer group on models with sliding layers."""
        return self._num_layers // sum(self.layer_groups)

    @property
    def kv_window(self) -> int | None:
        """Tokens the sliding (or chunked local) layers keep; None when every layer keeps every token."""
        return self._sliding_window if self._num_sliding_layers else None

    def blocks_per_sequence(self, context: int) -> int:
        """KV blocks one sequence of ``context`` tokens occupies (sliding layers hold only the window)."""
        return int(
            kv_blocks_per_sequence(
                context,
                self.block_size,
                self._sliding_window,
                self._num_layers,
                self._num_sliding_layers,
                self.state_blocks_per_sequence,
            )
        )

    def max_concurrency(self, context: int) -> int:
        """Most sequences of ``context`` tokens the KV pool holds at once."""
        context = require_positive_int("context", context)
        return self.num_blocks // self.blocks_per_sequence(context) if self.num_blocks > 0 else 0

    def max_context(self, concurrency: int) -> int:
        """Longest context each of ``concurrency`` sequences can hold at once (never past the model's own)."""
        concurrency = require_positive_int("concurrency", concurrency)
        if self.num_blocks <= 0:
            return 0
        longest = self._model_max_context
        per_seq_blocks = self.num_blocks // concurrency - self.state_blocks_per_sequence
        if per_seq_blocks <= 0:
            return 0
        if not self._sliding_window or not self._num_sliding_layers:
            fits = per_seq_blocks * self.block_size
            return fits if longest is None else min(fits, longest)
        # Sliding layers stop growing at the window; search the largest context that fits.
        lo, hi = 0, per_seq_blocks * self.block_size * 64 + self.block_size
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.blocks_per_sequence(mid) - self.state_blocks_per_sequence <= per_seq_blocks:
                lo = mid
            else:
                hi = mid - 1
        return lo if longest is None else min(lo, longest)

    def to_dict(self) -> dict[str, object]:
        d = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        d.update(
            # no memory is "negative": what the reservations lack is shortfall_bytes (issue 37)
            unreserved_bytes=max(self.unreserved_bytes, 0.0),
            total_bytes=self.total_bytes,
            fits=self.fits,
            weights_fit=self.weights_fit,
            shortfall_bytes=self.shortfall_bytes,
        )
        if self.context is not None:
            d["max_concurrency"] = self.max_concurrency(self.context)
        if self.concurrency is not None:
            d["max_context"] = self.max_context(self.concurrency)
        return d


_weights_cache: SpecCache[dict[str, float]] = SpecCache(4096)


def weight_bytes_per_gpu(
    model: ModelSpec, scheme: PrecisionScheme, tp: int = 1, ep: int = 1, attention_dp: int = 1, pp: int = 1
) -> dict[str, float]:
    """Weight bytes one rank stores, by tensor class (quantization scales included); cached per model.

    With ``pp`` stages a GPU holds its stage's share of the layers (the most loaded stage: ceil(L/pp) layers)
    and the larger of the embedding and the LM head (first and last stage)."""
    key = (scheme.name, tp, ep, attention_dp, pp)
    return dict(_weights_cache.get((model,), key, lambda: _weight_bytes(model, scheme, tp, ep, attention_dp, pp)))


def _weight_bytes(
    model: ModelSpec, scheme: PrecisionScheme, tp: int, ep: int, attention_dp: int = 1, pp: int = 1
) -> dict[str, float]:
    fmt = {
        "dense": scheme.weight_format.bytes_per_element,
        "expert": scheme.expert_weight_format.bytes_per_element,
        "embedding": scheme.embedding_format.bytes_per_element,
    }
    out: dict[str, float] = {}
    stage = -(-model.num_layers // pp) / model.num_layers  # share of the layers on the most loaded stage
    for lin in rank_linears(model, tp, ep, attention_dp):
        if lin.name == "lm_head" and model.tie_word_embeddings:
            continue
        share = 1.0 if lin.group in ("embedding", "lm_head") else stage
        out[lin.group] = out.get(lin.group, 0.0) + lin.elements * fmt[lin.weight_class] * share
    if pp > 1 and "lm_head" in out:  # first stage: embedding, last stage: LM head; the fuller one counts
        smaller = min(("embedding", "lm_head"), key=lambda g: out.get(g, 0.0))
        out.pop(smaller, None)
    # Norm weights (and qk-norms, sinks) are never quantized: they stay in the 16/32-bit activation dtype.
    out["norms"] = norm_elements(model) * scheme.activation_format.bytes_per_element * stage
    return out


def activation_bytes(
    model: ModelSpec,
    engine: EngineSpec,
    tp: int,
    ep: int,
    act_bytes: float,
    attention_dp: int = 1,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
) -> float:
    """Peak activation workspace at the engine's batched-token budget (prior estimate).

    The largest live tensors in a step of T tokens: the FFN up-projection output and its activation
    (3 x width per token for a gated FFN, 2 x for a plain one), a handful of hidden-size buffers, the query
    projection, and float32 logits for up to max_num_seqs sampled tokens. T and max_num_seqs are the run's
    (``max_num_batched_tokens`` / ``max_num_seqs``; None: the preset's): the engines size this reserve from
    them (vLLM's profiling run is a dummy step of ``max_num_batched_tokens`` tokens and a sampler pass over
    ``max_num_seqs`` sequences; SGLang reserves 1.5 MB per token of ``chunked_prefill_size``). A prior: no
    engine's peak workspace has been measured by this project.
    """
    if engine.id == "ideal":
        return 0.0
    tokens = engine.max_num_batched_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    # a step samples at most one sequence per token (vLLM's dummy run: min(max_num_seqs, max_num_batched_tokens))
    seqs = min(engine.max_num_seqs if max_num_seqs is None else max_num_seqs, tokens)
    width = model.intermediate_size / tp if model.num_dense_ffn_layers else 0.0
    if model.moe:
        width = max(width, model.moe.experts_per_token * model.moe.expert_intermediate_size / (tp * attention_dp // ep))
    # gate_up output (2 x width gated, 1 x plain) plus the activated product (1 x width) live together
    ffn_buffers = ((2 if model.gated_ffn else 1) + 1) * width
    # prior: residual, normed input, attention output, o_proj output, FFN output and the all-reduce /
    # fused-add scratch (6 hidden-size tensors), plus the query projection this rank computes
    hidden_buffers = 6 * model.hidden_size + model.q_proj_dim / tp
    per_token = (ffn_buffers + hidden_buffers) * act_bytes
    # float32 logits of each sampled sequence and the sampler's float32 probabilities (2 vocab-sized tensors)
    logits = seqs * model.vocab_size * LOGIT_BYTES * 2
    return tokens * per_token + logits


@dataclass(frozen=True)
class _Pool:
    """The part of a budget that depends only on the deployment, the memory fraction and the block size (no
    context or concurrency): computed once per such triple (:data:`_pools`)."""

    breakdown: dict[str, float]
    weights: float
    act: float
    runtime: float
    capacity: float
    reserved: float
    pool: float
    kv_tok: float
    block_bytes: float
    state_seq: float
    state_blocks: int
    num_blocks: int
    pool_rounded: float
    notes: tuple[str, ...]


_pools: SpecCache[_Pool] = SpecCache(1024)


def _pool_part(dep: Deployment, fraction: float, block: int, tokens: int | None, seqs: int | None) -> _Pool:
    """What the deployment reserves (weights, activations, runtime), the KV pool the engine's ``fraction`` leaves,
    and its blocks of ``block`` tokens; ``tokens``/``seqs``: the run's step budget and sequence limit."""
    model, hw, eng, scheme = dep.model, dep.hardware, dep.engine, dep.scheme
    breakdown = weight_bytes_per_gpu(model, scheme, dep.tp, dep.ep, dep.attention_dp, dep.pp)
    weights = sum(breakdown.values())
    act_bytes = scheme.activation_format.bytes_per_element
    act = activation_bytes(model, eng, dep.tp, dep.ep, act_bytes, dep.attention_dp, tokens, seqs)
    runtime = eng.cuda_context_bytes + eng.cuda_graph_bytes + (eng.comm_buffer_bytes if dep.tp > 1 else 0.0)
    capacity = hw.memory.usable  # what the driver exposes: the engines take their fractions of it
    reserved = weights + act + runtime
    if eng.kv_fraction_of == "total":
        pool = fraction * capacity - reserved
    else:
        pool = fraction * (capacity - reserved)
    kv_tok, block_bytes, state_seq = _kv_geometry(dep, block)
    state_blocks = int(-(-state_seq // block_bytes)) if state_seq else 0
    num_blocks = int(pool // block_bytes) if pool > 0 else 0
    pool_rounded = num_blocks * block_bytes  # >= 0: a negative "pool" is reported as unreserved_bytes
    notes = _kv_notes(dep, block, kv_tok, state_seq, state_blocks) + _layout_notes(dep)
    if pool <= 0:
        notes.append(
            f"weights + activations + runtime need {reserved / 1e9:.1f} GB per GPU but "
            f"{fraction:.0%} of {capacity / 1e9:.1f} GB leaves no KV pool; use more TP or a narrower precision"
        )
    return _Pool(
        breakdown,
        weights,
        act,
        runtime,
        capacity,
        reserved,
        pool,
        kv_tok,
        block_bytes,
        state_seq,
        state_blocks,
        num_blocks,
        pool_rounded,
        tuple(notes),
    )


def _kv_groups(model: ModelSpec) -> tuple[int, int, int]:
    """(windowed layers, full groups, sliding groups) of the model's attention layers (:func:`kv_layer_groups`)."""
    window_layers = model.num_sliding_layers if model.sliding_window else 0
    full_groups, sliding_groups = kv_layer_groups(model.num_attention_layers, window_layers)
    return window_layers, full_groups, sliding_groups


def _kv_geometry(dep: Deployment, block: int) -> tuple[float, float, float]:
    """(KV bytes per token, bytes per block of ``block`` tokens, fixed state bytes per sequence) on one GPU."""
    model, kv_fmt, tp = dep.model, dep.kv_format, dep.tp
    # per GPU per token of the replica's sequences: a stage holds 1/pp of the layers, and an attention-DP rank
    # the KV of 1/attention_dp of the sequences (balanced), so the pool's blocks count replica-wide tokens
    layout = dep.pp * dep.attention_dp
    kv_tok = model.kv_bytes_per_token(kv_fmt.bytes_per_element, tp) / layout
    _, full_groups, sliding_groups = _kv_groups(model)
    groups = full_groups + sliding_groups
    # a block holds one layer group's tokens when sliding layers are paged apart from full ones (groups > 1)
    block_bytes = kv_tok * block / groups if groups > 1 else kv_tok * block
    state_seq = model.state_bytes_per_sequence(dep.scheme.activation_format.bytes_per_element, tp) / layout
    if model.compressed_attention:
        # DeepSeek-V4: window entries, partial compressed entries and compressor state do not grow with the
        # context; paged as fixed per-sequence state (an upper bound below the window: the window is counted full)
        state_seq += model.fixed_kv_bytes_per_sequence(kv_fmt.bytes_per_element, tp) / layout
    return kv_tok, block_bytes, state_seq


def _kv_notes(dep: Deployment, block: int, kv_tok: float, state_seq: float, state_blocks: int) -> list[str]:
    """What the KV pool holds that a reader would not assume: replicated MLA latents, fixed linear-attention or
    compressed-attention state, blocks of one layer group."""
    model, tp = dep.model, dep.tp
    notes = []
    if model.mla and tp > 1:
        notes.append("MLA latent KV is replicated on every TP rank (as in vLLM)")
    if model.linear_attention:
        notes.append(
            f"{model.num_linear_layers} linear-attention layers hold a fixed {state_seq / 1e6:.1f} MB state per "
            f"sequence ({state_blocks} KV blocks) instead of a growing KV cache"
        )
    if model.compressed_attention:
        ca = model.compressed_attention
        hca = "/".join(map(str, sorted(set(ca.hca_ratios))))
        notes.append(
            f"compressed attention: the KV pool grows {kv_tok:.0f} B per token (one entry per {ca.indexer_ratio} "
            f"tokens on {ca.csa_layers} CSA layers with indexer keys, per {hca} on {len(ca.hca_ratios)} HCA layers) "
            f"plus a fixed {state_seq / 1e6:.1f} MB per sequence ({state_blocks} blocks: the {ca.window}-entry window "
            "of every layer, partial entries, fp32 compressor state)"
        )
    window_layers, full_groups, sliding_groups = _kv_groups(model)
    groups = full_groups + sliding_groups
    if groups > 1:
        notes.append(
            f"{window_layers} of {model.num_attention_layers} layers hold at most {model.sliding_window} tokens "
            f"(window or chunk): a KV block holds {block} tokens of {model.num_attention_layers // groups} layers "
            f"(one layer group, as vLLM's hybrid allocator pages them; {groups} per {block} tokens of every layer)"
        )
    return notes


def _layout_notes(dep: Deployment) -> list[str]:
    """How the parallel layout splits the memory: pipeline stages, attention data parallelism, KV heads that TP
    cannot split."""
    model, tp, pp, dp = dep.model, dep.tp, dep.pp, dep.attention_dp
    notes = []
    if pp > 1:
        notes.append(f"{pp} pipeline stages: each GPU holds {-(-model.num_layers // pp)} of {model.num_layers} layers")
    if dp > 1:
        notes.append(
            f"attention data parallel x{dp}: attention and dense weights replicated per group, experts split "
            f"{dep.ep} ways; KV per GPU counted per token of the whole replica (sequences spread over {dp} groups)"
        )
    if not model.mla and tp > model.num_kv_heads:
        notes.append(f"tp={tp} > {model.num_kv_heads} KV heads: KV heads replicated, not split")
    return notes


def memory_budget(
    dep: Deployment,
    *,
    context: int | None = None,
    concurrency: int | None = None,
    gpu_memory_utilization: float | None = None,
    block_size: int | None = None,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
) -> MemoryBudget:
    """Per-GPU memory budget of a resolved deployment; see :class:`MemoryBudget`. Raises InfercastError on invalid
    input (``infercast.memory_budget`` takes a model and a GPU and resolves the deployment).

    ``context`` x ``concurrency``: the load to check; ``gpu_memory_utilization`` / ``block_size``: the run's (None:
    the engine's); ``max_num_batched_tokens`` / ``max_num_seqs``: the run's step budget and sequence limit, which
    size the activation reserve (None: the engine preset's).
    """
    context = _checked_context(dep.model, context)
    if concurrency is not None:
        concurrency = require_positive_int("concurrency", concurrency)
    eng = dep.engine
    fraction = (
        eng.kv_fraction
        if gpu_memory_utilization is None
        else require_fraction("gpu_memory_utilization", gpu_memory_utilization)
    )
    block = eng.block_size if block_size is None else require_positive_int("block_size", block_size)
    tokens = (
        None
        if max_num_batched_tokens is None
        else require_positive_int("max_num_batched_tokens", max_num_batched_tokens)
    )
    seqs = None if max_num_seqs is None else require_positive_int("max_num_seqs", max_num_seqs)
    objects, values = spec_key(dep)
    part = _pools.get(
        objects, (*values, fraction, block, tokens, seqs), lambda: _pool_part(dep, fraction, block, tokens, seqs)
    )
    if part.pool <= 0 and gpu_memory_utilization is not None:
        raise _no_kv_cache(eng, fraction, part)
    return _budget(dep, part, block, context, concurrency)


def _checked_context(model: ModelSpec, context: int | None) -> int | None:
    """``context`` as a positive int within the model's context (None stays None)."""
    if context is None:
        return None
    context = require_positive_int("context", context)
    if context > model.max_context:
        raise InfercastError(
            f"{context} tokens exceed the {model.max_context}-token context of {model.id}", field="context"
        )
    return context


def _no_kv_cache(eng: EngineSpec, fraction: float, part: _Pool) -> DoesNotFitError:
    """The error for a ``gpu_memory_utilization`` that leaves no KV cache, with the least fraction that would."""
    reserved, capacity = part.reserved, part.capacity
    need = reserved / capacity if eng.kv_fraction_of == "total" else None
    # rounded up, so that the fraction named does leave a KV cache
    hint = (
        f"; at least {math.ceil(need * 1000) / 1000:g} is needed for any KV cache"
        if need is not None and need < 1
        else ""
    )
    return DoesNotFitError(
        f"{fraction:g} of {capacity / 1e9:.1f} GB leaves no KV cache after {reserved / 1e9:.1f} GB of weights, "
        f"activations and runtime per GPU{hint}",
        field="gpu_memory_utilization",
    )


def _budget(dep: Deployment, part: _Pool, block: int, context: int | None, concurrency: int | None) -> MemoryBudget:
    """The :class:`MemoryBudget` of a pool and a load (``context`` x ``concurrency``, each possibly None)."""
    model = dep.model
    budget = MemoryBudget(
        model_id=model.id,
        gpu_id=dep.hardware.id,
        tp=dep.tp,
        ep=dep.ep,
        precision=dep.scheme.name,
        kv_precision=dep.kv_format.name,
        engine=dep.engine.id,
        capacity_bytes=part.capacity,
        weights_bytes=part.weights,
        weights_breakdown=dict(part.breakdown),
        kv_bytes_per_token=part.kv_tok,
        activation_bytes=part.act,
        runtime_overhead_bytes=part.runtime,
        kv_pool_bytes=part.pool_rounded,
        block_size=block,
        block_bytes=part.block_bytes,
        num_blocks=part.num_blocks,
        context=context,
        concurrency=concurrency if concurrency is not None else (1 if context is not None else None),
        notes=list(part.notes),
        state_bytes_per_sequence=part.state_seq,
        unreserved_bytes=part.pool,
        _sliding_window=model.sliding_window,
        _model_max_context=model.max_context,
        _num_layers=model.num_attention_layers,
        _num_sliding_layers=model.num_sliding_layers if model.sliding_window else 0,
        state_blocks_per_sequence=part.state_blocks,
        layout=dep.layout,
    )
    if context is not None:
        object.__setattr__(budget, "kv_cache_bytes", budget.required_blocks * part.block_bytes)
    return budget


def require_fit(budget: MemoryBudget) -> None:
    """Raise a DoesNotFitError that says why when the budget does not fit."""
    if budget.fits:
        return
    gb = 1e9
    if not budget.weights_fit:
        raise DoesNotFitError(
            f"{budget.model_id} at {budget.precision} needs {budget.weights_bytes / gb:.1f} GB of weights + "
            f"{(budget.activation_bytes + budget.runtime_overhead_bytes) / gb:.1f} GB runtime per GPU "
            f"with tp={budget.tp}, "
            f"but {budget.gpu_id} has {budget.capacity_bytes / gb:.1f} GB; raise `tp` or use a narrower `precision`",
            field="memory",
        )
    need, tokens = budget.required_blocks, 1 if budget.context is None else budget.context
    most = budget.max_concurrency(tokens)
    hint = (
        f"at this context at most {most} sequences fit"
        if most
        else f"not one sequence of this context fits: the longest that does is {budget.max_context(1):,} tokens"
    )
    raise DoesNotFitError(
        f"{budget.sequences} x {tokens} tokens need {need} KV blocks "
        f"({need * budget.block_bytes / gb:.1f} GB) but the pool holds {budget.num_blocks} "
        f"({budget.kv_pool_bytes / gb:.1f} GB); {hint}",
        field="memory",
    )


_NARROWER = ("fp8", "int8", "w8a16", "int4")
"""Weight formats :func:`what_would_fit` tries, widest first (the GPU must run each: ``schemes_for``)."""
_WIDER_TP = (2, 4, 8, 16)


def what_would_fit(dep: Deployment, **budget: int | float | None) -> list[dict[str, object]]:
    """Layouts near ``dep`` that fit where ``dep`` does not: the smallest larger TP alone, the widest narrower
    weight format alone, an fp8 KV cache alone, and the fewest GPUs with the widest format (empty: none does).
    Each: ``{"tp", "precision", "kv_precision", "flags"}`` with the command-line flags that change; ``budget``: the
    other :func:`memory_budget` keywords (context, concurrency, ...)."""
    from infercast.specs.precision import get_scheme, schemes_for

    runnable = set(schemes_for(dep.hardware))
    bits = dep.scheme.weight_format.bits
    formats = [p for p in _NARROWER if p in runnable and get_scheme(p).weight_format.bits < bits]
    tps = [t for t in _WIDER_TP if t > dep.tp]

    def fits(tp: int, precision: str, kv: str) -> bool:
        try:
            other = Deployment.resolve(
                dep.model,
                dep.hardware,
                tp=tp,
                ep=dep.ep,
                pp=dep.pp,
                attention_dp=dep.attention_dp,
                precision=precision,
                kv_precision=kv,
                engine=dep.engine,
            )
            return memory_budget(other, **budget).fits  # type: ignore[arg-type]
        except InfercastError:  # a TP the heads do not divide, a KV format the chip lacks
            return False

    kv = dep.kv_format.name
    kvs = [kv] if kv == "fp8" else [kv, "fp8"]
    widths = [dep.scheme.name, *formats]
    ok = [(t, p, k) for t in (dep.tp, *tps) for p in widths for k in kvs if fits(t, p, k)]
    # one change at a time, then the fewest GPUs with the widest format and the KV format kept if it can be
    picks = [
        [c for c in ok if c[1:] == (dep.scheme.name, kv)],
        [c for c in ok if c[0] == dep.tp and c[2] == kv],
        [c for c in ok if c[:2] == (dep.tp, dep.scheme.name)],
        sorted(ok, key=lambda c: (c[0], widths.index(c[1]), kvs.index(c[2]))),
    ]
    found: list[tuple[int, str, str]] = []
    for pick in picks:
        if pick and pick[0] not in found:
            found.append(pick[0])
    out = []
    for tp, precision, kv_fmt in found:
        flags = [f"--tp {tp}"] if tp != dep.tp else []
        flags += [f"--precision {precision}"] if precision != dep.scheme.name else []
        flags += [f"--kv-precision {kv_fmt}"] if kv_fmt != kv else []
        out.append({"tp": tp, "precision": precision, "kv_precision": kv_fmt, "flags": " ".join(flags)})
    return out
