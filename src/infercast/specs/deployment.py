"""A resolved, validated serving configuration: model x hardware x number formats x parallelism x engine."""

from __future__ import annotations

from dataclasses import dataclass

from infercast.errors import InfercastError, require_positive_int
from infercast.specs.catalog import get_hardware, get_model
from infercast.specs.engine import EngineSpec, get_engine
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.precision import SCHEMES, NumberFormat, PrecisionScheme, get_kv_format, get_scheme


@dataclass(frozen=True)
class Deployment:
    """One replica: ``tp`` GPUs of one kind serving one model (experts split ``ep`` ways)."""

    model: ModelSpec
    hardware: HardwareSpec
    scheme: PrecisionScheme
    kv_format: NumberFormat
    tp: int
    ep: int
    engine: EngineSpec
    compute_key: str
    """Hardware peak key the GEMMs run at (e.g. 'bf16' for W4A16 on Hopper)."""

    @classmethod
    def resolve(
        cls,
        model: str | ModelSpec,
        gpu: str | HardwareSpec,
        *,
        tp: int = 1,
        ep: int = 1,
        precision: str | None = None,
        kv_precision: str | None = None,
        engine: str | EngineSpec = "vllm",
    ) -> Deployment:
        """Look up and validate every part; raises InfercastError naming the bad field."""
        model_spec = get_model(model)
        hw = get_hardware(gpu)
        eng = get_engine(engine)
        tp = require_positive_int("tp", tp)
        ep = require_positive_int("ep", ep)
        model_spec.check_parallelism(tp, ep)
        check_tp_on_hardware(hw, tp)
        scheme = get_scheme(precision) if precision else _default_scheme(model_spec, hw)
        key = scheme.compute_key(hw)
        kv = get_kv_format(kv_precision or _kv_default(scheme, hw))
        return cls(model_spec, hw, scheme, kv, tp, ep, eng, key)

    @property
    def attention_key(self) -> str:
        """Attention runs in 16 bits (bf16, or fp16 on chips without bf16)."""
        return "bf16" if "bf16" in self.hardware.peak_flops else "fp16"

    @property
    def label(self) -> str:
        par = f"tp{self.tp}" + (f"-ep{self.ep}" if self.ep > 1 else "")
        return f"{self.model.id} on {self.tp}x {self.hardware.id} {self.scheme.name}/kv-{self.kv_format.name} {par}"


def default_precision(model: ModelSpec, hw: HardwareSpec) -> str:
    """The scheme used when none is given: the model's native one, with bf16 replaced by fp16 on chips that
    have no bf16 (T4, V100), as engines do there. Every entry point (predict, memory, sweep, compare,
    simulate) resolves through :meth:`Deployment.resolve`, so they all agree."""
    return _default_scheme(model, hw).name


def _default_scheme(model: ModelSpec, hw: HardwareSpec) -> PrecisionScheme:
    scheme = get_scheme(model.default_precision)
    if scheme.compute == "bf16" and "bf16" not in hw.peak_flops and "fp16" in hw.peak_flops:
        return SCHEMES["fp16"]
    return scheme


def check_tp_on_hardware(hw: HardwareSpec, tp: int) -> None:
    """Raise a ``tp`` error when ``tp`` GPUs of ``hw`` cannot form one tensor-parallel group: more GPUs than
    one node's scale-up fabric joins (multi-node TP is not modelled), or no link to run collectives over."""
    if tp > hw.max_gpus_per_node:
        raise InfercastError(
            f"tp={tp} exceeds the {hw.max_gpus_per_node} GPUs of one {hw.id} node (max_gpus_per_node); "
            "multi-node TP is not modelled",
            field="tp",
        )
    if tp > 1 and hw.collective_bandwidth_bytes_s <= 0:
        raise InfercastError(
            f"{hw.id} has no link for tensor-parallel collectives (interconnect and host_link bandwidth are 0); "
            "use tp=1 or give a link bandwidth in its spec",
            field="tp",
        )


def _kv_default(scheme: PrecisionScheme, hw: HardwareSpec) -> str:
    # KV follows the activation dtype; on chips without bf16 (T4, V100) engines run fp16.
    if scheme.kv_default == "bf16" and "bf16" not in hw.peak_flops:
        return "fp16"
    return scheme.kv_default
