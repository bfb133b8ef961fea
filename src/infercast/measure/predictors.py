"""What the cost model predicts for a measurement record, under a given cost profile.

Every record kind maps onto the cost layer: steps onto ``StepCostModel.step_time``, TTFT/TPOT/throughput
onto the static-batch phases used by ``predict``, operators onto the operator table, GEMMs and copies onto
:mod:`infercast.cost.kernels`. Calibration and validation both go through :func:`predict_record`.
"""

from __future__ import annotations

from functools import cache

from infercast.analysis.phases import decode_sums, prefill_sums
from infercast.cost.batch import StepBatch
from infercast.cost.kernels import copy_time, gemm_time
from infercast.cost.profile import CostProfile, load_profile
from infercast.cost.step import StepCostModel
from infercast.errors import InfercastError
from infercast.measure.records import KINDS, Record
from infercast.specs.catalog import get_hardware, get_model
from infercast.specs.deployment import Deployment
from infercast.specs.model import ModelSpec

PREDICTABLE = frozenset(KINDS)
"""Record kinds :func:`predict_record` handles (serving kinds through a small simulation)."""

OP_NAMES = {
    "mlp_up_proj": "gate_up_proj",
    "mlp_down_proj": "down_proj",
    "attn_pre_proj": "qkv_proj",
    "attn_post_proj": "o_proj",
}
"""Operator names used by published profilers (Vidur) mapped onto infercast's operator table."""


def truncated(model: ModelSpec, layers: int) -> ModelSpec:
    """The first ``layers`` decoder layers of ``model`` (what a layer-subset measurement ran)."""
    if not layers or layers >= model.num_layers:
        return model
    update: dict[str, object] = {"num_layers": layers, "id": f"{model.id}[:{layers}]"}
    if model.num_sliding_layers:
        update["num_sliding_layers"] = round(model.num_sliding_layers * layers / model.num_layers)
    if model.moe:
        update["moe"] = model.moe.model_copy(update={"num_dense_layers": min(model.moe.num_dense_layers, layers)})
    return model.model_copy(update=update)


@cache
def record_deployment(
    model: str, gpu: str, precision: str, kv_precision: str, tp: int, ep: int, engine: str, layers: int
) -> Deployment:
    """The deployment a record describes (cached: records share a few)."""
    spec = truncated(get_model(model), layers)
    return Deployment.resolve(spec, gpu, tp=tp, ep=ep, precision=precision or None,
                              kv_precision=kv_precision or None, engine=engine)  # fmt: skip


def deployment_of(rec: Record, engine: str | None = None, layers: int | None = None) -> Deployment:
    return record_deployment(
        rec.model, rec.gpu, rec.precision, rec.kv_precision, rec.tp, rec.ep, engine or rec.engine,
        rec.layers if layers is None else layers,
    )  # fmt: skip


def profile_for(rec: Record, profiles: dict[str, CostProfile] | None) -> CostProfile:
    """The profile to use for a record: an explicit one keyed 'gpu/engine', else the installed one."""
    key = f"{rec.gpu}/{rec.engine}"
    if profiles and key in profiles:
        return profiles[key]
    hw = get_hardware(rec.gpu)
    return load_profile(hw.id, hw.architecture, rec.engine)


def predict_record(rec: Record, profiles: dict[str, CostProfile] | None = None) -> float:
    """Predicted value of ``rec`` in SI units (seconds, or tokens/s for throughputs)."""
    profile = profile_for(rec, profiles)
    if rec.kind in ("gemm", "hbm_copy", "launch_overhead"):
        hw = get_hardware(rec.gpu)
        if rec.kind == "gemm":
            key = "bf16" if rec.precision in ("", "bf16") else rec.precision
            return gemm_time(profile, hw, key, rec.m, rec.n, rec.k)
        if rec.kind == "hbm_copy":
            return copy_time(profile, hw, rec.bytes)
        return profile.kernel_overhead_eager_s
    if rec.kind == "op":
        dep = deployment_of(rec, layers=1)
        model = StepCostModel(dep, profile)
        target = OP_NAMES.get(rec.op, rec.op)
        if target not in model.names:
            raise InfercastError(f"unknown operator {rec.op!r}; known: {', '.join(model.names)}", field="op")
        bd = model.breakdown(StepBatch.uniform(prefill_seqs=1, chunk=rec.batch, cached=0))
        return float(bd.time_s[model.names.index(target), 0])
    if rec.kind in ("serving_ttft", "serving_tpot"):
        return _serving(rec, profile)
    dep = deployment_of(rec)
    model = StepCostModel(dep, profile)
    window = dep.model.sliding_window
    if rec.kind == "prefill_step":
        batch = StepBatch.uniform(prefill_seqs=rec.batch, chunk=rec.input_len, cached=rec.context, window=window)
        return float(model.step_time(batch)[0])
    if rec.kind == "decode_step":
        batch = StepBatch.uniform(decode_seqs=rec.batch, context=rec.context, window=window)
        return float(model.step_time(batch)[0])
    if rec.kind == "ttft":
        return float(prefill_sums(model, rec.input_len, rec.batch).total_s[0]) + profile.request_overhead_s
    decode = float(decode_sums(model, rec.input_len, rec.output_len, rec.batch).total_s[0])
    if rec.kind == "tpot":
        return decode / max(rec.output_len - 1, 1)
    if rec.kind == "static_throughput":
        ttft = float(prefill_sums(model, rec.input_len, rec.batch).total_s[0]) + profile.request_overhead_s
        return rec.batch * rec.output_len / (ttft + decode)
    raise InfercastError(f"cannot predict records of kind {rec.kind!r}", field="kind")


def metric_of(rec: Record) -> str:
    """The metric family a record belongs to (rows of the accuracy table)."""
    if rec.kind == "ttft":
        return "ttft (batch 1)" if rec.batch == 1 else "ttft (batch > 1)"
    if rec.kind == "static_throughput":
        return "static-batch throughput"
    return rec.kind


def _serving(rec: Record, profile: CostProfile) -> float:
    """``batch`` requests sent together to a serving engine: mean TTFT or median TPOT from the simulator."""
    from infercast.sim.api import simulate

    dep = deployment_of(rec)
    res = simulate(
        dep.model, dep.hardware, tp=rec.tp, ep=rec.ep, precision=rec.precision or None,
        kv_precision=rec.kv_precision or None, engine=rec.engine,
        scheduler="sarathi" if dep.engine.chunked_prefill else "vllm", input_len=rec.input_len,
        output_len=max(rec.output_len, 2), num_requests=rec.batch, offline=True, profile=profile,
    )  # fmt: skip
    return res["ttft_s"]["mean"] if rec.kind == "serving_ttft" else res["tpot_s"]["p50"]
