"""A resolved, validated serving configuration: model x hardware x number formats x parallelism x engine."""

from __future__ import annotations

from dataclasses import dataclass

from infercast.errors import require_positive_int
from infercast.specs.catalog import get_hardware, get_model
from infercast.specs.engine import EngineSpec, get_engine
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.precision import NumberFormat, PrecisionScheme, get_kv_format, get_scheme


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
        scheme = get_scheme(precision or model_spec.default_precision)
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


def _kv_default(scheme: PrecisionScheme, hw: HardwareSpec) -> str:
    # KV follows the activation dtype; on chips without bf16 (T4, V100) engines run fp16.
    if scheme.kv_default == "bf16" and "bf16" not in hw.peak_flops:
        return "fp16"
    return scheme.kv_default
