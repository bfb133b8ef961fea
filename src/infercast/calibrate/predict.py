"""What the cost model predicts for a measurement record, under a given cost profile.

Every record kind maps onto the cost layer: steps onto ``StepCostModel.step_time``, TTFT/TPOT/throughput
onto the static-batch phases used by ``predict``, operators onto the operator table (one layer), GEMMs
and copies onto :mod:`infercast.cost.kernels`, launches onto the profile's launch overheads, serving kinds
onto a small simulation: every kind is predictable. Calibration and validation both go through
:func:`predict_record` (:func:`predict_located` puts the record's ``path:row`` in front of errors).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from infercast.analysis.phases import decode_sums, prefill_sums
from infercast.calibrate.serving import serving_bench, simulate_serving
from infercast.cost.batch import StepBatch
from infercast.cost.kernels import copy_time, gemm_time
from infercast.cost.profile import SAME_RATE, CostProfile, load_profile
from infercast.cost.step import StepCostModel
from infercast.errors import InfercastError
from infercast.records.record import SERVING_KINDS, Record
from infercast.specs.catalog import get_hardware, get_model
from infercast.specs.deployment import Deployment
from infercast.specs.engine import get_engine
from infercast.specs.engine_launch import UserLaunch
from infercast.specs.hardware import HardwareSpec
from infercast.specs.truncate import truncated

OP_NAMES = {
    "mlp_up_proj": "gate_up_proj",
    "mlp_down_proj": "down_proj",
    "attn_pre_proj": "qkv_proj",
    "attn_post_proj": "o_proj",
}
"""Operator names used by published profilers (Vidur) mapped onto infercast's operator table."""


def gemm_key(precision: str) -> str:
    """The GEMM-efficiency key of a record's ``precision`` ('' means bf16)."""
    return precision or "bf16"


GEMM_RECORD_BYTES = {"fp32": (4.0, 4.0), "tf32": (4.0, 4.0), "fp8": (1.0, 2.0)}
"""(operand, output) bytes per element of the GEMMs a ``gemm`` record of that precision times, where not 16-bit:
the harness (harness/microbench.py ``_gemm_fn``) runs fp32 ``F.linear`` on fp32 tensors and fp8 as
``torch._scaled_mm`` on e4m3 operands with a bf16 output."""


def gemm_record_time(profile: CostProfile, hw: HardwareSpec, rec: Record) -> float:
    """Predicted seconds of a ``gemm`` record: :func:`~infercast.cost.kernels.gemm_time` with the bytes its
    precision moves."""
    in_bytes, out_bytes = GEMM_RECORD_BYTES.get(gemm_key(rec.precision), (2.0, 2.0))
    return gemm_time(profile, hw, gemm_key(rec.precision), rec.m, rec.n, rec.k, in_bytes, out_bytes)


def fitted_gemm_key(precision: str) -> str:
    """The one fitted efficiency curve a precision's GEMMs use (formats of one tensor-core rate share it)."""
    key = gemm_key(precision)
    return SAME_RATE.get(key, (key,))[0]


@contextmanager
def located(rec: Record) -> Iterator[None]:
    """Re-raise an InfercastError from predicting ``rec`` with the record's ``path:row`` in front."""
    try:
        yield
    except InfercastError as exc:
        raise InfercastError(f"{rec.where}: {exc}", allowed=exc.allowed) from None


@cache
def record_deployment(
    model: str,
    gpu: str,
    precision: str,
    kv_precision: str,
    tp: int,
    ep: int,
    engine: str,
    layers: int,
    attention_dp: int = 1,
    moe_backend: str = "",
    cuda_graphs: str = "",
    graph_max_tokens: int = 0,
) -> Deployment:
    """The deployment a record describes (cached: records share a few); ``moe_backend``, ``cuda_graphs`` and
    ``graph_max_tokens``: the run's fused-MoE kernel and CUDA graphs where its launch set them (EngineSpec fields
    of those names; empty / 0: the preset's)."""
    spec = truncated(get_model(model), layers)
    given = {"moe_backend": moe_backend, "cuda_graphs": cuda_graphs, "graph_max_tokens": graph_max_tokens}
    overrides = {k: (v, f"the run's {k} {v}") for k, v in given.items() if v}
    launched = UserLaunch(engine, overrides).apply(get_engine(engine)) if overrides else engine
    return Deployment.resolve(
        spec,
        gpu,
        tp=tp,
        ep=ep,
        precision=precision or None,
        kv_precision=kv_precision or None,
        engine=launched,
        attention_dp=attention_dp,
    )


def deployment_of(rec: Record, engine: str | None = None, layers: int | None = None) -> Deployment:
    return record_deployment(
        rec.model,
        rec.gpu,
        rec.precision,
        rec.kv_precision,
        rec.tp,
        rec.ep,
        engine or rec.engine,
        rec.layers if layers is None else layers,
        rec.attention_dp,
        rec.moe_backend,
        rec.cuda_graphs,
        rec.graph_max_tokens,
    )


def profile_for(rec: Record, profiles: dict[str, CostProfile] | None) -> CostProfile:
    """The profile to use for a record: an explicit one keyed 'gpu/engine', else the installed one."""
    key = f"{rec.gpu}/{rec.engine}"
    if profiles and key in profiles:
        return profiles[key]
    hw = get_hardware(rec.gpu)
    return load_profile(hw.id, hw.architecture, rec.engine)


def op_batch(rec: Record) -> StepBatch:
    """The one-layer step an ``op`` record times.

    ``attention_prefill`` (torch harness): ``batch`` causal prefills of ``input_len`` tokens on ``context``
    cached ones; ``attention_decode``: ``batch`` decode tokens, each attending ``context`` cached tokens. The
    harness times both without a sliding window, so none is applied here. Every other operator (a GEMM, as
    in the published Vidur profiles) is timed on ``batch`` tokens: one prefill chunk of that many tokens.
    """
    if rec.op == "attention_prefill":
        return StepBatch.uniform(prefill_seqs=rec.batch, chunk=rec.input_len, cached=rec.context)
    if rec.op == "attention_decode":
        return StepBatch.uniform(decode_seqs=rec.batch, context=rec.context)
    return StepBatch.uniform(prefill_seqs=1, chunk=rec.batch, cached=0)


def predict_record(rec: Record, profiles: dict[str, CostProfile] | None = None) -> float:
    """Predicted value of ``rec`` in SI units (seconds, or tokens/s for throughputs)."""
    profile = profile_for(rec, profiles)
    if rec.kind in ("gemm", "hbm_copy", "launch_overhead"):
        hw = get_hardware(rec.gpu)
        if rec.kind == "gemm":
            return gemm_record_time(profile, hw, rec)
        if rec.kind == "hbm_copy":
            return copy_time(profile, hw, rec.bytes)
        if rec.op == "cuda_graph":
            return profile.kernel_overhead_graph_s
        return profile.kernel_overhead_eager_s
    if rec.kind == "op":
        dep = deployment_of(rec, layers=1)
        model = StepCostModel(dep, profile)
        target = OP_NAMES.get(rec.op, rec.op)
        if target not in model.names:
            raise InfercastError(f"unknown operator {rec.op!r}; known: {', '.join(model.names)}", field="op")
        bd = model.breakdown(op_batch(rec))
        return float(bd.time_s[model.names.index(target), 0])
    if rec.kind in SERVING_KINDS:
        return simulate_serving(deployment_of(rec), profile, serving_bench(rec)).value(rec.kind, rec.stat)
    dep = deployment_of(rec)
    model = StepCostModel(dep, profile)
    window = dep.model.attention_window
    if rec.kind == "prefill_step":
        batch = StepBatch.uniform(prefill_seqs=rec.batch, chunk=rec.input_len, cached=rec.context, window=window)
        return float(model.step_time(batch)[0])
    if rec.kind == "decode_step":
        batch = StepBatch.uniform(decode_seqs=rec.batch, context=rec.context, window=window)
        return float(model.step_time(batch)[0])
    if rec.kind == "ttft":
        return float(prefill_sums(model, rec.input_len, rec.batch).total_s[0]) + profile.mean_request_overhead_s
    decode = float(decode_sums(model, rec.input_len, rec.output_len, rec.batch).total_s[0])
    if rec.kind == "tpot":
        return decode / max(rec.output_len - 1, 1)
    if rec.kind == "static_throughput":
        ttft = float(prefill_sums(model, rec.input_len, rec.batch).total_s[0]) + profile.mean_request_overhead_s
        return rec.batch * rec.output_len / (ttft + decode)
    raise InfercastError(f"cannot predict records of kind {rec.kind!r}", field="kind")


def serving_notes(rec: Record, profiles: dict[str, CostProfile] | None = None) -> tuple[str | None, float | None]:
    """What a serving record's simulation says about its mean TTFT, as ``simulate`` would print it: the cause
    (``"kv"``, ``"slots"``) of its cliff warning, and, for a TTFT record whose mean is mostly the opening burst,
    the mean TTFT (seconds) of the requests after it; (None, None) for other kinds."""
    if rec.kind not in SERVING_KINDS:
        return None, None
    with located(rec):
        stats = simulate_serving(deployment_of(rec), profile_for(rec, profiles), serving_bench(rec))
    return stats.cliff, stats.burst_rest_ttft_s if rec.kind == "serving_ttft" else None


def predict_located(rec: Record, profiles: dict[str, CostProfile] | None = None) -> float:
    """:func:`predict_record`, with any user error prefixed by the record's ``path:row``."""
    with located(rec):
        return predict_record(rec, profiles)


def metric_of(rec: Record) -> str:
    """The metric family a record belongs to (rows of the accuracy table)."""
    if rec.kind == "ttft":
        return "ttft (batch 1)" if rec.batch == 1 else "ttft (batch > 1)"
    if rec.kind == "static_throughput":
        return "static-batch throughput"
    if rec.closed_loop and rec.kind != "serving_throughput":
        return f"closed-loop {rec.kind.removeprefix('serving_')} ({rec.stat})"
    return rec.kind
