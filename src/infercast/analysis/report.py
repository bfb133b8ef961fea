"""The two-phase report: what each phase costs, which ceiling binds, where the time goes, what would help."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np

from infercast.cost.cache import SpecCache
from infercast.cost.series import RangeSums
from infercast.cost.step import StepCostModel
from infercast.memory import weight_bytes_per_gpu
from infercast.specs.deployment import Deployment
from infercast.specs.precision import SCHEMES, PrecisionScheme, schemes_for

CEILINGS = ("compute", "memory", "interconnect", "overhead")


def roofline_bound(flops: float | np.ndarray, nbytes: float | np.ndarray, ridge_point: float) -> np.ndarray:
    """0 (compute-bound) where the work's arithmetic intensity reaches the ridge point of the compute roof it
    runs under, i.e. its time on the compute roof is at least its time on the HBM roof; else 1 (memory-bound).

    The one definition of "bound" for a phase and an operator (predict, compare, roofline all read it): the
    roofline's, not the derated kernel times, so a point left of the ridge is never called compute-bound."""
    f = np.asarray(flops, dtype=float)
    return np.where((f > 0) & (f >= ridge_point * np.asarray(nbytes, dtype=float)), 0, 1)


def compute_bound(flops: float, nbytes: float, ridge_point: float) -> bool:
    """:func:`roofline_bound` for one point, in plain floats (predict's hot path; tested equal to it)."""
    return flops > 0 and flops >= ridge_point * nbytes


@dataclass(frozen=True)
class PhaseOpRow:
    """One operator's totals over a phase (per GPU)."""

    name: str
    group: str
    flops: float
    bytes: float
    arithmetic_intensity: float
    time_s: float
    share: float
    bound: str


@dataclass(frozen=True)
class PhaseReport:
    """One phase (prefill or decode) of a prediction. FLOPs and bytes are for the whole replica (all GPUs)."""

    name: str
    time_s: float
    steps: float
    flops: float
    bytes: float
    flops_per_gpu: float
    bytes_per_gpu: float
    arithmetic_intensity: float
    ridge_point: float
    compute_key: str
    """Tensor-core rate the GEMMs run at (the peak the ridge point is computed from)."""
    bound: str
    """'compute' or 'memory': the phase's arithmetic intensity against the ridge point (:func:`roofline_bound`)."""
    time_share_by_ceiling: dict[str, float]
    time_share_by_group: dict[str, float]
    achieved_tflops_per_gpu: float
    achieved_bandwidth_tb_s_per_gpu: float
    _op_data: tuple = field(default=(), repr=False, compare=False)

    @property
    def ops(self) -> list[PhaseOpRow]:
        """Per-operator totals over the phase (built on first use)."""
        if not self._op_data:
            return []
        names, groups, flops, nbytes, times, roof, overhead, ceiling, total = self._op_data
        bounds = np.where(roof >= overhead, ceiling, 3)  # launch/latency above the roofline: overhead-bound
        scale = 1.0 / total if total else 0.0
        return [
            PhaseOpRow(n, g, f, b, f / b if b else 0.0, t, t * scale, CEILINGS[c])
            for n, g, f, b, t, c in zip(
                names, groups, flops.tolist(), nbytes.tolist(), times.tolist(), bounds.tolist(), strict=True
            )
        ]

    def to_dict(self, ops: bool = False) -> dict[str, object]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        d["time_share_by_ceiling"] = dict(self.time_share_by_ceiling)
        d["time_share_by_group"] = dict(self.time_share_by_group)
        if ops:
            d["ops"] = [asdict(o) for o in self.ops]
        return d


def phase_report(name: str, sums: RangeSums, model: StepCostModel, column: int = 0) -> PhaseReport:
    """Summarise one column of a run of steps into a :class:`PhaseReport`."""
    dep = model.dep
    flops = sums.flops[:, column]
    nbytes = sums.bytes[:, column]
    compute = sums.compute_s[:, column]
    memory = sums.memory_s[:, column]
    overhead = sums.overhead_s[:, column]
    times = sums.time_s[:, column]
    engine = float(sums.engine_overhead_s[column])
    total = float(times.sum()) + engine
    # Each op's roofline time goes to the ceiling that binds it (interconnect for collectives, else compute or
    # memory by roofline_bound); launch/latency and engine time to "overhead".
    roof = np.maximum(compute, memory)
    ridge = dep.hardware.ridge_point(dep.compute_key)
    ceiling = np.where(model.is_comm, 2, roofline_bound(flops, nbytes, ridge))  # 0 compute, 1 memory, 2 interconnect
    roof_by_ceiling = np.bincount(ceiling, weights=roof, minlength=3).tolist()
    scale = 1.0 / total if total else 0.0
    by_ceiling = (*roof_by_ceiling[:3], float(overhead.sum()) + engine)
    share_c = {k: v * scale for k, v in zip(CEILINGS, by_ceiling, strict=True)}
    by_group_arr = np.bincount(model.group_index, weights=times, minlength=len(model.group_names)).tolist()
    by_group = dict(zip(model.group_names, by_group_arr, strict=True))
    by_group["engine overhead"] = engine
    share_g = {k: v * scale for k, v in sorted(by_group.items(), key=lambda kv: -kv[1])}
    flops_gpu, bytes_gpu = float(flops.sum()), float(nbytes.sum())
    return PhaseReport(
        name=name,
        time_s=total,
        steps=float(sums.steps[column]),
        flops=flops_gpu * dep.tp,
        bytes=bytes_gpu * dep.tp,
        flops_per_gpu=flops_gpu,
        bytes_per_gpu=bytes_gpu,
        arithmetic_intensity=flops_gpu / bytes_gpu if bytes_gpu else 0.0,
        ridge_point=ridge,
        compute_key=dep.compute_key,
        bound=CEILINGS[0 if compute_bound(flops_gpu, bytes_gpu, ridge) else 1] if bytes_gpu or flops_gpu else "none",
        time_share_by_ceiling=share_c,
        time_share_by_group=share_g,
        achieved_tflops_per_gpu=flops_gpu * scale / 1e12,
        achieved_bandwidth_tb_s_per_gpu=bytes_gpu * scale / 1e12,
        _op_data=(model.names, model.groups, flops, nbytes, times, roof, overhead, ceiling, total),
    )


_NARROWER_8BIT = ("fp8", "int8", "w8a16")
"""8-bit schemes in order of preference: FP8 W8A8 where the chip has FP8 tensor cores, else INT8 W8A8, else
INT8 weight-only."""
_NARROWER_4BIT = ("int4",)
_MIN_CUT = 1.5
"""Only suggest a scheme that cuts the linear-layer weight bytes at least this much."""


def _linear_weight_bytes(dep: Deployment, scheme: PrecisionScheme) -> float:
    """Weight bytes of the linear layers on one rank (the part a quantization scheme narrows)."""
    parts = weight_bytes_per_gpu(dep.model, scheme, dep.tp, dep.ep, dep.attention_dp, dep.pp)
    return sum(v for k, v in parts.items() if k not in ("embedding", "lm_head", "norms"))


_narrower_cache: SpecCache[str | None] = SpecCache(1024)


def _narrower_weights_tip(dep: Deployment) -> str | None:
    """'8-bit or 4-bit weights (--precision fp8 / int4) cut the linear-layer weights 2.0-3.8x', or None.

    Cached per model, GPU, scheme and parallelism."""
    return _narrower_cache.get(
        (dep.model, dep.hardware), (dep.scheme.name, dep.tp, dep.ep), lambda: _narrower_tip_text(dep)
    )


def _narrower_tip_text(dep: Deployment) -> str | None:
    narrower = _narrower_weights(dep)
    if not narrower:
        return None
    names = " / ".join(name for name, _ in narrower)
    bits = " or ".join(f"{SCHEMES[name].weight_format.bits:.0f}-bit" for name, _ in narrower)
    cuts = "-".join(f"{factor:.1f}" for _, factor in narrower)
    return f"{bits} weights (--precision {names}) cut the linear-layer weights {cuts}x"


def _narrower_weights(dep: Deployment) -> list[tuple[str, float]]:
    """Schemes the GPU can run whose weights are narrower than the current ones: (name, bytes cut factor).

    At most one 8-bit and one 4-bit scheme; none for weights already at 4 bits (int4, nvfp4, mxfp4)."""
    current = _linear_weight_bytes(dep, dep.scheme)
    runnable = set(schemes_for(dep.hardware))
    out = []
    for family in (_NARROWER_8BIT, _NARROWER_4BIT):
        for name in family:
            if name in runnable and name != dep.scheme.name:
                factor = current / _linear_weight_bytes(dep, SCHEMES[name])
                if factor >= _MIN_CUT:
                    out.append((name, factor))
                break
    return out


def _decode_blocks_tip(decode: PhaseReport, model: StepCostModel, batch: int) -> str | None:
    """A tip when decode attention without split-KV is held back by its thread blocks (the torch engine's SDPA):
    fewer blocks than it takes to stream at the GPU's bandwidth, and a tenth of decode time or more."""
    rate = model.profile.decode_attn_cta_bytes_s
    if not rate:  # split-KV kernels (every serving engine): nothing to say, and no per-operator rows to build
        return None
    attn = next((o for o in decode.ops if o.name == "attention_decode"), None)
    if attn is None or attn.share < 0.1:
        return None
    blocks = batch * model.dep.model.kv_heads_per_rank(model.dep.tp)
    bandwidth = model.dep.hardware.memory.bandwidth_bytes_s * model.profile.attn_decode_efficiency
    if blocks * rate >= bandwidth:
        return None
    hbm = model.dep.hardware.memory.bandwidth_bytes_s
    return (
        f"decode attention ({attn.share:.0%} of decode) runs one thread block per sequence and KV head, "
        f"{blocks:.0f} here, streaming {blocks * rate / 1e12:.2f} TB/s of the {hbm / 1e12:.2f} TB/s HBM: a "
        "split-KV (flash-decoding) kernel or a larger batch would use the whole bandwidth"
    )


def advice(prefill: PhaseReport, decode: PhaseReport, model: StepCostModel, batch: int) -> list[str]:
    """Plain-language levers that would speed up each phase, from the report's numbers."""
    dep = model.dep
    hw, tips = dep.hardware, []
    if decode.steps > 0:
        streamed = model.weight_bytes_streamed(batch) * decode.steps
        weights_share = streamed / decode.bytes_per_gpu if decode.bytes_per_gpu else 0
        if decode.bound == "memory":
            tips.append(
                f"decode is memory-bound (AI {decode.arithmetic_intensity:.0f} vs ridge {decode.ridge_point:.0f} "
                f"FLOP/B): more HBM bandwidth speeds it up almost 1:1"
            )
            narrower = _narrower_weights_tip(dep) if weights_share > 0.5 else None
            if narrower:
                tips.append(f"weights are {weights_share:.0%} of decode bytes: {narrower}")
            if weights_share > 0.5:
                tips.append(f"larger batches reuse each weight read: batch {batch} -> {batch * 4} raises AI ~4x")
            if weights_share < 0.5 and dep.kv_format.bytes_per_element >= 2:
                tips.append("KV-cache reads dominate decode: an fp8 KV cache (--kv-precision fp8) halves them")
        blocks_tip = _decode_blocks_tip(decode, model, batch)
        if blocks_tip:
            tips.append(blocks_tip)
        if decode.time_share_by_ceiling.get("overhead", 0) > 0.2:
            tips.append(
                f"{decode.time_share_by_ceiling['overhead']:.0%} of decode is launch/runtime overhead: "
                "CUDA graphs and bigger batches amortise it"
            )
    if prefill.bound == "compute":
        fp8 = "fp8" in hw.peak_flops and dep.compute_key in ("bf16", "fp16")
        tips.append(
            "prefill is compute-bound: more FLOP/s"
            + (" (fp8 compute doubles the tensor peak on this GPU)" if fp8 else "")
            + ", more TP, or prefix caching to skip shared prompt tokens"
        )
    comm_tip = _communication_tip(prefill, decode, dep)
    if comm_tip:
        tips.append(comm_tip)
    return tips


_COMM_SHARE = 0.15
"""Name the communication of a phase once its collectives take more than this share of the phase."""

_COMM_REMEDIES = {
    "tp_allreduce": ("the tensor-parallel all-reduce", "fewer TP ranks (more replicas) or a faster interconnect"),
    "expert_allreduce": (
        "the expert tensor-parallel all-reduce",
        "fewer expert-TP ranks (more EP) or a faster interconnect",
    ),
    "ep_all_to_all": (
        "the expert-parallel all-to-all (dispatch and combine)",
        "fewer EP ranks, keeping them in one NVLink domain, or overlapping it with compute (two micro-batches)",
    ),
    "logits_gather": ("the logits gather", "fewer TP ranks"),
    "pp_send": ("the pipeline-stage sends", "fewer pipeline stages"),
}
"""What each collective of ``cost/operators.py`` is, and what shrinks it."""


def _communication_tip(prefill: PhaseReport, decode: PhaseReport, dep: Deployment) -> str | None:
    """The collective that takes the largest share of a phase, when communication binds that phase, with what
    would shrink it (the remedy depends on the collective: TP, EP or pipeline traffic)."""
    best: tuple[float, str, str] | None = None
    for phase in (prefill, decode):
        if phase.time_share_by_ceiling.get("interconnect", 0) <= _COMM_SHARE or not phase._op_data:
            continue
        names, _, _, _, times, _, _, ceiling, total = phase._op_data
        for name, t, c in zip(names, times.tolist(), ceiling.tolist(), strict=True):
            share = t / total if total else 0.0
            if c == 2 and (best is None or share > best[0]):
                best = (share, name, phase.name)
    if best is None:
        return None
    share, name, phase_name = best
    what, remedy = _COMM_REMEDIES.get(name, (name, "a faster interconnect"))
    ranks = {"ep_all_to_all": dep.ep, "pp_send": dep.gpus, "expert_allreduce": dep.gpus_per_stage}.get(name, dep.tp)
    across = " (across nodes here)" if ranks > dep.hardware.max_gpus_per_node else ""
    return f"{what} takes {share:.0%} of {phase_name}{across}: {remedy} would help"
