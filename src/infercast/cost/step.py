"""Step time: the roofline of every operator with fitted efficiencies, plus launch and runtime overheads.

``StepCostModel(deployment).step_time(batch)`` is the one function every layer above (predict, sweep,
simulator, planner, calibration) uses for time. Per operator::

    t_op = max(FLOPs / (peak · eff(M)), bytes / (bandwidth · eff_bw)) + kernels · (launch + t_kernel) + hops · alpha

where ``t_kernel`` is a kernel's measured fixed time (GEMM, attention; plus a per-sequence time for decode
attention), and collectives with a measured latency curve (all-reduce, all-gather, all-to-all vs message
bytes, per engine and group size) take ``calls · curve(message)`` in place of the ring's bytes/BW + hops·alpha.

with ``eff(M) = eff_max · M / (M + m_half)`` for GEMMs of M rows (M at least ``gemm_m_floor``); plus a per-step
engine overhead ``step_overhead + seq_overhead · sequences`` (plus, for an engine that runs its layers unfused,
``layers · layer_overhead``, graph or eager). An eager step (any step outside CUDA graphs) takes at least
``layers · eager_layer_host_s`` before that overhead (the host launching it binds; the gap is counted as engine
overhead).
All parameters come from :mod:`infercast.cost.profile`.

The routed experts (``experts_gate_up``, ``experts_down``) take the fused-MoE parameters where the GPU's kernel
profile has them for the compute key (``CostProfile.moe_params``, fitted to the fused-MoE tables by
:mod:`infercast.calibrate.kernel_fit` with this form): ``moe_eff_max``/``moe_m_half`` at M = T·k/E rows per
expert (times w / (w + ``moe_width_half``) for w expert columns per rank, where the fit has it), ``moe_hbm_efficiency``
on their bytes, ``moe_latency_s`` per kernel, and ``moe_pair_passes · T·k·(h + w)
· act / (HBM · moe_hbm_efficiency)`` per step on the gate/up row (T: the tokens the rank's experts see).
Without them the experts are dense GEMMs. A monolithic fused-MoE kernel (MXFP4 experts through the trtllm-gen
kernels on Blackwell, :func:`_monolithic_experts`) is one call per layer: no routing or activation kernels beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from infercast.cost.attention_variants import GDN_CHUNK
from infercast.cost.batch import F, StepBatch
from infercast.cost.cache import SpecCache, spec_key
from infercast.cost.collectives import collective_curve
from infercast.cost.curves import Curve
from infercast.cost.op_row import EXPERT_FRAC, NUM_COLUMNS, OpRow
from infercast.cost.operators import ROUTING_KERNELS, OpTable, build_op_table
from infercast.cost.profile import MOE_PAIR_ELEMENT_BYTES, MOE_PARAMS, CostProfile, load_profile, profile_generation
from infercast.errors import InfercastError
from infercast.specs.deployment import Deployment
from infercast.specs.hardware import HardwareSpec, LinkSpec

BOUNDS = ("compute", "memory", "interconnect", "latency")

TENSOR_TO_VECTOR_RATIO = 16.0
"""Fallback for a spec without an fp32 (CUDA-core) rate: the 16-bit dense tensor peak over this ratio
(A100: 312 / 19.5 = 16; H100 SXM: 989 / 67 = 14.8). Every built-in chip lists fp32, so this only serves
user-defined hardware; elementwise ops are memory-bound, so it rarely sets a time."""


@dataclass(frozen=True)
class OpBreakdown:
    """Per-operator results for N steps: arrays of shape (n_ops, N)."""

    names: list[str]
    groups: list[str]
    kinds: list[str]
    flops: np.ndarray
    bytes: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    overhead_s: np.ndarray
    time_s: np.ndarray
    engine_overhead_s: np.ndarray
    """Per-step engine overhead (not attributed to an operator), shape (N,)."""
    sources: tuple[str, ...] = ()
    """Per operator: the measured table or fit (or prior) that set its efficiency or latency."""

    @property
    def bound(self) -> np.ndarray:
        """Which ceiling each operator's time is set by: compute, memory, interconnect or latency."""
        is_link = np.array([k == "comm" for k in self.kinds])[:, None]
        roof = np.where(self.compute_s >= self.memory_s, 0, np.where(is_link, 2, 1))
        return np.where(self.overhead_s > np.maximum(self.compute_s, self.memory_s), 3, roof)


_tables: SpecCache[OpTable] = SpecCache(1024)


def _op_table(dep: Deployment) -> OpTable:
    """Operator tables depend only on the deployment: build each once."""
    return _tables.get((dep,), (), lambda: build_op_table(dep))


class StepCostModel:
    """Compiled cost model of one deployment (model x GPU x formats x TP/EP x engine)."""

    def __init__(self, dep: Deployment, profile: CostProfile | None = None):
        self.dep = dep
        self.pp = dep.pp
        hw = dep.hardware
        self.profile = profile or load_profile(hw.id, hw.architecture, dep.engine.id)
        self.table: OpTable = _op_table(dep)
        moe_key = _moe_key(dep, self.profile) if dep.model.moe else None
        rows = _monolithic(self.table.rows) if _monolithic_experts(dep) else self.table.rows
        n = len(rows)
        self.n_ops = n
        self.names = [r.name for r in rows]
        self.groups = [r.group for r in rows]
        self.kinds = [r.kind for r in rows]
        p = self.profile
        self.coef = _coefficients(dep, rows, p)
        """One stacked coefficient matrix: FLOPs, bytes, GEMM rows (the last set to 1 where the efficiency is
        independent of rows)."""
        moe = self.profile.moe_params(moe_key) if moe_key else None
        narrow = _narrow_shard(dep, p, moe_key) if moe is not None else 1.0
        inv_peak, eff_max, m_half = _compute_ceilings(dep, rows, p, moe, self.coef, narrow)
        inv_bw, self.curves = _bandwidths(hw, rows, p, moe)
        """Operators priced by a measured curve: (index, message-bytes coefficients, calls per step, curve)."""
        self.inv_peak_eff = (inv_peak / eff_max)[:, None]
        self.m_half = m_half[:, None]
        self.inv_bw = inv_bw[:, None]
        self.kernels = np.array([r.kernels for r in rows])[:, None]
        self.graphs_decode_only = dep.engine.cuda_graphs == "decode"
        launched = dep.engine.graph_max_tokens
        ranks = dep.attention_dp if dep.engine.limits_per_dp_rank else 1
        self.graph_max_tokens = float(p.graph_max_tokens if launched is None else launched) * ranks
        """Largest step replayed as a CUDA graph: the launch's (EngineSpec.graph_max_tokens), else the profile's,
        per attention-DP rank where each rank captures its own. Decode-only graphs are captured by batch size, so
        there it bounds the step's sequences (a draft-verify step's 1 + k tokens per sequence replay in one)."""
        layers = -(-dep.model.num_layers // dep.pp)  # the most loaded pipeline stage's
        self.layer_overhead_s = (p.layer_overhead_graph_s * layers, p.layer_overhead_eager_s * layers)
        # an eager step is host-bound below this (whole model: under pipeline parallelism a step's micro-batches
        # pass every stage, so the floor is the model's layers once)
        self.eager_floor_s = p.eager_layer_host_s * dep.model.num_layers
        self.latency = _latencies(hw, rows, p, moe, self.curves)
        # decode attention's measured per-sequence time, per layer kernel: (op index, seconds per decode token)
        self.per_decode = [
            (i, r.kernels * p.attn_decode_seq_s)
            for i, r in enumerate(rows)
            if r.bandwidth == "attn_decode" and p.attn_decode_seq_s
        ]
        self.cta_bound: list[tuple[int, float]] = _cta_bound(dep, rows, p)
        """Decode attention without split-KV (``decode_attn_cta_bytes_s``): (op index, seconds per byte and
        decode token). One thread block per sequence and KV head streams at most that rate, so a step with few
        blocks takes bytes / (decode tokens x KV heads x rate) where that exceeds its bandwidth time."""
        self.chunk_serial: list[tuple[int, float]] = _chunk_serial(dep, rows, p)
        """Prefill kernels whose chunks run in series within a sequence (gated DeltaNet): (op index, seconds per
        prompt token of one sequence). Such a step takes at least that x its mean chunk per sequence."""
        self.per_token: list[tuple[int, float]] = _per_token(dep, rows, p, moe)
        """Seconds per token of the step on an operator outside its roofline: (op index, seconds). The routed
        experts' pair passes (fused-MoE tables), on the gate/up row; the all-reduces' per-token time beyond their
        curves (``allreduce_token_s``), on the all-reduce row; an 8-bit GEMM's activation quantisation
        (``gemm_act_quant_bytes``), on its row."""
        moe_key = moe_key if moe is not None else _weight_only_experts(dep, p)
        self.sources = [_op_source(r, p, moe_key) for r in rows]
        for i, _, _, curve in self.curves:
            self.sources[i] = curve.source
        if p.allreduce_token_s and "tp_allreduce" in self.names:
            i = self.names.index("tp_allreduce")
            fitted = p.provenance.get("allreduce_token_s", "")
            self.sources[i] = f"{self.sources[i]}; {p.allreduce_token_s * 1e9:.0f} ns per token per call: {fitted}"
        self.active = np.array([r.active for r in rows])
        self.is_comm = np.array([k == "comm" for k in self.kinds])
        self.group_names = list(dict.fromkeys(self.groups))
        self.group_index = np.array([self.group_names.index(g) for g in self.groups])
        self.log1m_k_over_e = np.log1p(-self.table.moe_k_over_e) if self.table.moe_k_over_e else 0.0

    # ----- features --------------------------------------------------------------------------------------
    def columns(self, batch: StepBatch) -> np.ndarray:
        """Feature matrix with the expert-touch fraction appended: shape (NUM_COLUMNS, N)."""
        x = batch.x
        cols = np.empty((NUM_COLUMNS, x.shape[1]))
        cols[: x.shape[0]] = x
        if self.pp > 1:
            # pipeline: the step's sequences form m = min(pp, sequences) micro-batches (a sequence is never split),
            # each carrying 1/m of the work across every stage, so a step costs the whole model at 1/m of the
            # work; with fewer sequences than stages, stages sit idle (the bubble). The sequence count stays the
            # step's: per-sequence CPU work is per sequence, whatever the micro-batching.
            m = np.clip(x[F["seqs"]], 1.0, self.pp)
            cols[1 : x.shape[0]] = x[1:] / m
            cols[F["seqs"]] = x[F["seqs"]]
            x = cols[: x.shape[0]]
        if self.table.moe_k_over_e:
            # expected fraction of a rank's experts that at least one of T tokens routes to: 1 - (1 - k/E)^T
            cols[EXPERT_FRAC] = -np.expm1(x[F["tokens"]] * self.log1m_k_over_e)
        else:
            cols[EXPERT_FRAC] = 0.0
        return cols

    def evaluate(self, cols: np.ndarray, fast: bool = False) -> tuple[np.ndarray, ...]:
        """The pieces :meth:`step_time` sums, per operator (rows) and step (columns of :meth:`columns`): FLOPs,
        bytes, compute time, memory time, launch/latency overhead, and the per-step engine overhead. ``fast``: a
        matrix product (columns may differ from the einsum path in the last bit)."""
        n = self.n_ops
        if fast:
            prod = self.coef @ cols
        else:  # einsum gives each column bit-identical results whatever N is (the simulator relies on it)
            prod = np.einsum("of,fn->on", self.coef, cols, optimize=False)
        flops, nbytes = prod[:n], prod[n : 2 * n]
        rows = np.maximum(prod[2 * n :], self.profile.gemm_m_floor)  # ops with no rows have no FLOPs either
        on = cols[self.active] > 0  # an operator runs only when its active feature is positive (no logits, no LM head)
        compute = on * flops * self.inv_peak_eff * (rows + self.m_half) / rows
        memory = on * nbytes * self.inv_bw
        for i, message, calls, curve in self.curves:
            memory[i] = on[i] * calls * curve(message @ cols)
        for i, per_block in self.cta_bound:
            memory[i] = np.maximum(memory[i], on[i] * nbytes[i] * per_block / np.maximum(cols[F["decode_tokens"]], 1.0))
        for i, per_token in self.chunk_serial:
            chunk = cols[F["prefill_tokens"]] / np.maximum(cols[F["prefill_seqs"]], 1.0)
            memory[i] = np.maximum(memory[i], on[i] * per_token * chunk)
        tokens = cols[F["tokens"]]
        if self.graphs_decode_only:  # graphs captured for generation batches alone: a prompt chunk runs eagerly
            graphed = (cols[F["seqs"]] <= self.graph_max_tokens) & (cols[F["prefill_tokens"]] <= 0)
        else:
            graphed = tokens <= self.graph_max_tokens
        per_kernel = np.where(graphed, self.profile.kernel_overhead_graph_s, self.profile.kernel_overhead_eager_s)
        per_step = self.profile.step_overhead_s + self.profile.seq_overhead_s * cols[F["seqs"]]
        if any(self.layer_overhead_s):
            per_step = per_step + np.where(graphed, *self.layer_overhead_s)
        overhead = on * (self.kernels * per_kernel + self.latency)
        for i, seconds in self.per_decode:
            overhead[i] = overhead[i] + on[i] * seconds * cols[F["decode_tokens"]]
        for i, seconds in self.per_token:
            overhead[i] = overhead[i] + on[i] * seconds * tokens
        # (per-sequence CPU work is per sequence of the whole step: ``columns`` keeps that count undivided)
        engine = (tokens > 0) * per_step
        if self.eager_floor_s:  # the host launching an eager step binds where the GPU finishes sooner
            gpu = (np.maximum(compute, memory) + overhead).sum(axis=0)
            host_bound = ~graphed & (tokens > 0)
            engine = engine + host_bound * np.maximum(self.eager_floor_s - gpu, 0.0)
        return flops, nbytes, compute, memory, overhead, engine

    # ----- public API --------------------------------------------------------------------------------------
    def step_time(self, batch: StepBatch, *, fast: bool = False) -> np.ndarray:
        """Seconds for each of the N steps in ``batch`` (shape (N,))."""
        _, _, compute, memory, overhead, engine = self.evaluate(self.columns(batch), fast)
        return (np.maximum(compute, memory) + overhead).sum(axis=0) + engine

    def breakdown(self, batch: StepBatch) -> OpBreakdown:
        """Per-operator FLOPs, bytes, times and binding ceiling for each step in ``batch``."""
        flops, nbytes, compute, memory, overhead, engine = self.evaluate(self.columns(batch), fast=False)
        return OpBreakdown(
            names=self.names,
            groups=self.groups,
            kinds=self.kinds,
            flops=flops,
            bytes=nbytes,
            compute_s=compute,
            memory_s=memory,
            overhead_s=overhead,
            time_s=np.maximum(compute, memory) + overhead,
            engine_overhead_s=engine,
            sources=tuple(self.sources),
        )

    @cached_property
    def weight_bytes(self) -> float:
        """Weight bytes one step streams on one rank when every expert is touched."""
        return self.table.weight_bytes

    @cached_property
    def _gemm_weight_bytes(self) -> tuple[np.floating, np.floating]:
        """GEMM weight bytes per step: those every step streams, and those of the routed experts (all touched)."""
        n = self.n_ops
        gemm = np.array([k == "gemm" for k in self.kinds])
        coef = self.coef[n : 2 * n][gemm]
        return coef[:, F["one"]].sum(), coef[:, EXPERT_FRAC].sum()

    def weight_bytes_streamed(self, tokens: float) -> float:
        """Weight bytes a step of ``tokens`` tokens streams on one rank (MoE: only experts it touches)."""
        dense, experts = self._gemm_weight_bytes
        frac = -np.expm1(tokens * self.log1m_k_over_e) if self.table.moe_k_over_e else 0.0
        return float(dense + experts * frac)

    @cached_property
    def param_provenance(self) -> dict[str, str]:
        """Where each profile parameter comes from, keyed ``param.<name>`` in name order (as reports list it).
        Shared by every caller: copy before changing it."""
        return {f"param.{k}": v for k, v in sorted(self.profile.provenance.items())}


def _compute_key(row: OpRow) -> str:
    """The tensor-core peak key of a GEMM or attention row (the op table always sets one for them)."""
    if row.compute_key is None:
        raise ValueError(f"operator {row.name!r} ({row.kind}) has no compute key")
    return row.compute_key


def _scale_out(hw: HardwareSpec) -> LinkSpec:
    """The scale-out network between nodes, which a multi-node layout needs."""
    if hw.scale_out is None:
        raise InfercastError(f"{hw.id} has no scale-out network for a layout across nodes", field="hardware")
    return hw.scale_out


def _kernel_latency(row: OpRow, p: CostProfile) -> float:
    """Measured fixed time per kernel of this operator's kind (0 without a kernel table)."""
    if row.kind == "gemm":
        return p.gemm_latency_s
    if row.kind == "attention":
        return p.attn_decode_latency_s if row.bandwidth == "attn_decode" else p.attn_prefill_latency_s
    return 0.0


MOE_GEMMS = ("experts_gate_up", "experts_down")
"""Operators of the routed experts' grouped GEMMs: fused-MoE parameters where measured."""


def _monolithic_experts(dep: Deployment) -> bool:
    """MXFP4 experts on a GPU with FP4 tensor cores through the trtllm-gen fused-MoE kernels: one call per layer that
    routes, activates and runs both grouped GEMMs (flashinfer ``trtllm_fp4_block_scale_moe``). vLLM's default there
    (``get_mxfp4_backend``, quantization/mxfp4.py, 0.11-0.14: ``SM100_FI_MXFP4_BF16``, or ``_MXFP8_TRTLLM`` with
    ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``) and SGLang's (``flashinfer_mxfp4`` for gpt-oss on SM100); TensorRT-LLM
    runs them where a launch sets ``moe_config.backend: TRTLLM`` (its default is CUTLASS)."""
    if dep.model.moe is None or dep.scheme.expert_weight_format.name != "mxfp4" or "fp4" not in dep.hardware.peak_flops:
        return False
    default = None if not dep.engine.id.startswith("trtllm") else "trtllm"
    return dep.engine.moe_backend == default


def _monolithic(rows: list[OpRow]) -> list[OpRow]:
    """Copies of ``rows`` for a monolithic fused-MoE kernel: the router row keeps its GEMM alone (no routing
    kernels), the activation row is empty and the down projection launches nothing of its own (the gate/up row
    carries the one call)."""
    out = []
    for r in rows:
        if r.name == "router":
            r = replace(r, kernels=r.kernels / (1 + ROUTING_KERNELS))
        elif r.name == "moe_activation":
            r = replace(r, kernels=0.0, flops=np.zeros_like(r.flops), bytes=np.zeros_like(r.bytes))
        elif r.name == "experts_down":
            r = replace(r, kernels=0.0)
        out.append(r)
    return out


_Moe = tuple[float, float, float, float, float] | None
"""The fused-MoE parameters of :func:`_moe_key`'s kernel (``CostProfile.moe_params``): eff_max, m_half, HBM
efficiency, latency, pair passes."""


def _coefficients(dep: Deployment, rows: list[OpRow], p: CostProfile) -> np.ndarray:
    """The operators' FLOPs, bytes and GEMM-rows coefficients stacked (3 x n_ops rows); decode attention's KV
    bytes re-read per query head where the profile says its kernels do (``decode_attn_group_reads``)."""
    n = len(rows)
    coef = np.vstack([np.array([getattr(r, a) for r in rows]) for a in ("flops", "bytes", "rows")])
    names = [r.name for r in rows]
    if (
        p.decode_attn_group_reads
        and not dep.model.mla
        and not dep.model.compressed_attention  # FlashMLA-style: one read per entry for all heads, as MLA
        and "attention_decode" in names
    ):
        # kernels that read K/V once per query head re-read each KV head (group size - 1) more times
        group = dep.model.num_attention_heads / dep.model.num_kv_heads
        i = names.index("attention_decode")
        scale = 1.0 + (group - 1.0) * p.decode_attn_group_reads
        for feat in ("decode_kv", "decode_kv_win"):
            coef[n + i, F[feat]] *= scale
    return coef


def _compute_ceilings(
    dep: Deployment, rows: list[OpRow], p: CostProfile, moe: _Moe, coef: np.ndarray, narrow: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(1 / peak, eff_max, m_half) per operator; sets the rows coefficient of ``coef`` to 1 for the operators
    whose efficiency does not depend on GEMM rows (attention, elementwise, communication). ``narrow``: the fused
    MoE ceiling's factor for this deployment's expert shards (:func:`_narrow_shard`)."""
    hw, n = dep.hardware, len(rows)
    vector_peak = hw.peak_flops.get("fp32", hw.peak_flops[dep.attention_key] / TENSOR_TO_VECTOR_RATIO)
    inv_peak, eff_max, m_half = (np.zeros(n) for _ in range(3))
    weight_only = _weight_only_experts(dep, p) if not moe else None
    for i, r in enumerate(rows):
        if r.kind == "gemm":
            inv_peak[i] = 1.0 / hw.peak(_compute_key(r))
            if moe and r.name in MOE_GEMMS:
                eff_max[i], m_half[i] = moe[0] * narrow, moe[1]
            else:
                key = weight_only if weight_only and r.name in MOE_GEMMS else _compute_key(r)
                eff_max[i], m_half[i] = p.gemm_params(key)
        elif r.kind == "attention":
            inv_peak[i] = 1.0 / hw.peak(_compute_key(r))
            gdn = r.name == GDN_PREFILL and p.gdn_prefill_efficiency > 0
            eff_max[i] = p.gdn_prefill_efficiency if gdn else p.attn_prefill_efficiency
            coef[2 * n + i, F["one"]] = 1.0  # efficiency independent of rows
        elif r.kind == "elementwise":
            # Norms, RoPE, activations, sampler: bandwidth-bound kernels whose fitted efficiency is on the
            # bytes side (hbm_efficiency); the vector-FLOP ceiling is only a floor, taken at the full rate.
            inv_peak[i] = 1.0 / vector_peak
            eff_max[i] = 1.0
            coef[2 * n + i, F["one"]] = 1.0
        else:  # comm: no compute ceiling (inv_peak 0); link_efficiency applies on the bytes side
            eff_max[i] = 1.0
            coef[2 * n + i, F["one"]] = 1.0
    return inv_peak, eff_max, m_half


def _bandwidths(
    hw: HardwareSpec, rows: list[OpRow], p: CostProfile, moe: _Moe
) -> tuple[np.ndarray, list[tuple[int, np.ndarray, float, Curve]]]:
    """1 / effective bandwidth per operator (links, scale-out network, decode attention, fused MoE, HBM), and
    the collectives a measured latency curve prices instead (their bandwidth term 0)."""
    inv_bw = np.zeros(len(rows))
    curves: list[tuple[int, np.ndarray, float, Curve]] = []
    for i, r in enumerate(rows):
        if r.bandwidth == "link":
            # Deployment.resolve refuses tp > 1 when this is 0
            inv_bw[i] = 1.0 / (hw.collective_bandwidth_bytes_s * p.link_efficiency)
            curve = collective_curve(p, hw, r.collective, r.ranks) if r.collective else None
            if curve is not None:  # measured latency vs message size replaces the ring's bytes/BW + hops·alpha
                inv_bw[i] = 0.0
                curves.append((i, r.message, r.calls, curve))
        elif r.bandwidth == "network":  # between nodes: the scale-out NIC of each GPU
            inv_bw[i] = 1.0 / (_scale_out(hw).bandwidth_bytes_s * p.link_efficiency)
        elif r.bandwidth == "attn_decode":
            inv_bw[i] = 1.0 / (hw.memory.bandwidth_bytes_s * p.attn_decode_efficiency)
        elif moe and r.name in MOE_GEMMS:
            inv_bw[i] = 1.0 / (hw.memory.bandwidth_bytes_s * moe[2])
        else:
            inv_bw[i] = 1.0 / (hw.memory.bandwidth_bytes_s * p.hbm_efficiency)
    return inv_bw, curves


def _latencies(
    hw: HardwareSpec, rows: list[OpRow], p: CostProfile, moe: _Moe, curves: list[tuple[int, np.ndarray, float, Curve]]
) -> np.ndarray:
    """Fixed seconds per step of each operator (column): its kernels' measured latencies plus the ring's hops
    x alpha (none for a collective priced by a measured curve)."""
    hops = np.array([r.hops for r in rows])
    hops[[i for i, *_ in curves]] = 0.0
    fixed = np.array([r.kernels * (moe[3] if moe and r.name in MOE_GEMMS else _kernel_latency(r, p)) for r in rows])
    # seconds per ring step: the network's latency_s is per step; alpha (allreduce_latency_s) per all-reduce
    # hop, i.e. per two ring steps (profiles/defaults.yaml)
    step_s = [_scale_out(hw).latency_s if r.bandwidth == "network" else 0.5 * p.allreduce_latency_s for r in rows]
    alpha = np.array(step_s)
    return (hops * alpha + fixed)[:, None]


def _cta_bound(dep: Deployment, rows: list[OpRow], p: CostProfile) -> list[tuple[int, float]]:
    """(op index, seconds per byte and decode token) of decode attention without split-KV (see
    :attr:`StepCostModel.cta_bound`); empty when the profile has no per-block rate."""
    if not p.decode_attn_cta_bytes_s:
        return []
    per_block = 1.0 / (dep.model.kv_heads_per_rank(dep.tp) * p.decode_attn_cta_bytes_s)
    return [(i, per_block) for i, r in enumerate(rows) if r.bandwidth == "attn_decode"]


GDN_PREFILL = "linear_attention_prefill"
"""The gated-DeltaNet prefill row (cost/attention_variants.py), whose kernel runs a sequence's chunks in series."""


def _chunk_serial(dep: Deployment, rows: list[OpRow], p: CostProfile) -> list[tuple[int, float]]:
    """(op index, seconds per prompt token of one sequence) of the gated-DeltaNet prefill: ``gdn_chunk_s`` per
    chunk of :data:`~infercast.cost.attention_variants.GDN_CHUNK` tokens in every linear-attention layer; empty
    without a measured value."""
    if not p.gdn_chunk_s:
        return []
    layers = dep.model.num_linear_layers
    return [(i, layers * p.gdn_chunk_s / GDN_CHUNK) for i, r in enumerate(rows) if r.name == GDN_PREFILL]


def _expert_width(dep: Deployment) -> float:
    """Columns of each routed expert's intermediate dimension on one rank (split tp x attention_dp / ep ways)."""
    assert dep.model.moe is not None
    return dep.model.moe.expert_intermediate_size / (dep.tp * dep.attention_dp // dep.ep)


def _narrow_shard(dep: Deployment, p: CostProfile, moe_key: str | None) -> float:
    """w / (w + moe_width_half) for the experts' w columns per rank, where the fused-MoE fit of ``moe_key`` has
    that parameter (narrow shards of a grouped GEMM run below its ceiling); else 1."""
    half = p.moe_width_half.get(moe_key or "", 0.0)
    if not half or dep.model.moe is None:
        return 1.0
    width = _expert_width(dep)
    return width / (width + half)


def _per_token(dep: Deployment, rows: list[OpRow], p: CostProfile, moe: _Moe) -> list[tuple[int, float]]:
    """Seconds per token outside the roofline (see :attr:`StepCostModel.per_token`): the fused-MoE pair passes,
    the tensor-parallel all-reduces' time beyond their curves (``allreduce_token_s``) and the 8-bit GEMMs'
    activation quantisation."""
    hw, names = dep.hardware, [r.name for r in rows]
    out: list[tuple[int, float]] = []
    if moe and "experts_gate_up" in names:
        mm = dep.model.moe
        assert mm is not None
        width = _expert_width(dep)
        pair_bytes = (
            mm.experts_per_token * (dep.model.hidden_size + width) * MOE_PAIR_ELEMENT_BYTES * dep.model.num_moe_layers
        )
        if dep.attention_dp > 1:
            # wide EP: the all-to-all dispatch (the ep_all_to_all rows) hands each rank only the pairs of its
            # own experts, 1/ep of them, where the measured tables' expert-map path passes over every pair
            pair_bytes /= dep.ep
        seconds = moe[4] * pair_bytes / (hw.memory.bandwidth_bytes_s * moe[2])
        out.append((names.index("experts_gate_up"), seconds))
    if p.allreduce_token_s and "tp_allreduce" in names:  # per token of each all-reduce call, beyond its curve
        i = names.index("tp_allreduce")
        out.append((i, p.allreduce_token_s * rows[i].kernels))
    for i, r in enumerate(rows):  # 8-bit GEMMs quantise their input activations first (memory-bound, serial)
        quant = p.gemm_act_quant_bytes.get(r.compute_key or "", 0.0) if r.kind == "gemm" else 0.0
        if quant and r.act_in and r.active == F["tokens"]:
            out.append((i, quant * r.act_in / hw.memory.bandwidth_bytes_s))
    return out


def _moe_key(dep: Deployment, p: CostProfile | None = None) -> str | None:
    """:func:`_base_moe_key`, or TensorRT-LLM's own kernel of that key where the profile has its fit
    (``<key>_<backend>``, calibrate.kernel_fit.ENGINE_MOE_KERNELS): the launch's ``moe_config.backend``, else its
    CUTLASS default. Its TRTLLM backend runs the base fits' trtllm-gen kernels on Blackwell."""
    key = _base_moe_key(dep, p)
    if key and p and dep.engine.id.startswith("trtllm"):
        own = f"{key}_{dep.engine.moe_backend or 'cutlass'}"
        if p.moe_params(own):
            return own
    return key


def _base_moe_key(dep: Deployment, p: CostProfile | None = None) -> str | None:
    """Compute key of the fused-MoE kernels the routed experts run, when a fitted MoE kernel covers the expert
    format: 16-bit experts at a 16-bit rate, fp8 experts at the fp8 rate (``fp8_triton``: vLLM's Triton kernel
    where the launch picks it and ``p`` has its fit), NVFP4 experts at the fp4 rate, int4 (W4A16) experts on their
    own fit, weight-only MXFP4 experts on their kernel's fit (``mxfp4``, unless the launch runs vLLM's Marlin
    kernel); others run as dense GEMMs, or on :func:`_weight_only_experts`' lowered curve."""
    key, fmt = dep.compute_key, dep.scheme.expert_weight_format.name
    if (key, fmt) == ("fp8", "fp8") and dep.engine.moe_backend == "triton" and p and p.moe_params("fp8_triton"):
        return "fp8_triton"
    if (key in ("bf16", "fp16") and fmt in ("bf16", "fp16")) or (key, fmt) in (("fp8", "fp8"), ("fp4", "nvfp4")):
        return key
    if key in ("bf16", "fp16") and fmt.startswith("int4"):
        return "int4"  # weight-only (W4A16) experts at the 16-bit rate
    if (
        key in ("bf16", "fp16")
        and fmt == "mxfp4"
        and dep.engine.moe_backend != "marlin"
        and p
        and p.moe_params("mxfp4")
    ):
        return "mxfp4"  # weight-only MXFP4 experts on the engine's own Hopper kernel (kernel_fit.W4A16_EXPERTS)
    return None


def _weight_only_experts(dep: Deployment, p: CostProfile) -> str | None:
    """For MXFP4 experts computed at a 16-bit rate that no fused-MoE fit prices (:func:`_moe_key`'s ``mxfp4``):
    ``w4a16`` where the profile has that kernel's lowered curve (:func:`infercast.calibrate.kernel_fit.
    w4a16_slowdown`: GPUs without FP4 tensor cores); ``w4a16_marlin`` where the launch runs them through vLLM's
    Marlin kernel (``EngineSpec.moe_backend``); else None (dense 16-bit GEMM parameters)."""
    if not dep.model.moe or dep.compute_key not in ("bf16", "fp16"):
        return None
    if dep.scheme.expert_weight_format.name != "mxfp4":
        return None
    keys = ("w4a16_marlin", "w4a16") if dep.engine.moe_backend == "marlin" else ("w4a16",)
    return next((k for k in keys if k in p.gemm_eff_max), None)


def _op_source(row: OpRow, p: CostProfile, moe_key: str | None = None) -> str:
    """Where the efficiency that sets an operator's time comes from (the profile's provenance; ``moe_key``: the
    fused-MoE fit the routed experts take, if any)."""
    if moe_key and row.name in MOE_GEMMS:
        names = ("gemm_eff_max", "gemm_m_half") if moe_key.startswith("w4a16") else MOE_PARAMS
        found = list(dict.fromkeys(p.provenance.get(f"{n}.{moe_key}", "") for n in names))
        return "; ".join(f for f in found if f)
    keys = {
        "gemm": [f"gemm_eff_max.{row.compute_key}", f"gemm_m_half.{row.compute_key}", "gemm_latency_s"],
        "attention": ["attn_decode_efficiency", "attn_decode_latency_s", "attn_decode_seq_s"]
        if row.bandwidth == "attn_decode"
        else ["attn_prefill_efficiency", "attn_prefill_latency_s"],
        "elementwise": ["hbm_efficiency"],
        "comm": ["link_efficiency", "allreduce_latency_s"],
    }[row.kind]
    found = list(dict.fromkeys(p.provenance.get(k, p.provenance.get("*", "")) for k in keys))
    return "; ".join(f for f in found if f)


def step_time(batch: StepBatch, deployment: Deployment, profile: CostProfile | None = None) -> np.ndarray:
    """Convenience: seconds per step for ``batch`` on ``deployment`` (through the cached :func:`cost_model`)."""
    return cost_model(deployment, profile).step_time(batch)


_models: SpecCache[StepCostModel] = SpecCache(512)


def cost_model(dep: Deployment, profile: CostProfile | None = None) -> StepCostModel:
    """The :class:`StepCostModel` of a deployment and explicit profile (None: the installed profiles), one
    object per deployment, profile and profile generation: callers may cache what they derive from it on
    its identity (the simulator's compiled step functions do)."""
    if profile is not None and not isinstance(profile, CostProfile):
        raise InfercastError(
            f"must be a CostProfile (or None: the installed profiles), got {type(profile).__name__}", field="profile"
        )
    objects, values = spec_key(dep)
    return _models.get((*objects, profile), (*values, profile_generation()), lambda: StepCostModel(dep, profile))
