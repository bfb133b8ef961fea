"""Accelerator specs: per-format dense peaks, HBM, caches, interconnect, power and price.

All quantities are SI (bytes, bytes/s, FLOP/s); capacities say whether the marketing "GB" is really GiB.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from infercast.errors import InfercastError

PEAK_KEYS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")


class MemorySpec(BaseModel):
    """Device memory (HBM/GDDR)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    capacity_bytes: float = Field(gt=0, description="Physical capacity in bytes (SI).")
    capacity_as_sold: str = Field(description='Capacity as marketed, e.g. "80 GB".')
    capacity_note: str = ""
    usable_bytes: float | None = Field(
        default=None,
        gt=0,
        description="Memory the CUDA/HIP driver exposes (cudaGetDeviceProperties totalGlobalMem, "
        "torch's 'total capacity'), bytes; None where not recorded (the physical capacity is used then).",
    )
    usable_note: str = ""
    bandwidth_bytes_s: float = Field(gt=0, description="Datasheet peak bandwidth, bytes/s (SI).")
    type: str = ""

    @property
    def usable(self) -> float:
        """Bytes the engines size their KV caches against: what the driver exposes, less than the physical
        capacity by its reserve (and, on GDDR with ECC on, by 1/16 more); the capacity where not recorded."""
        return self.capacity_bytes if self.usable_bytes is None else self.usable_bytes

    @field_validator("usable_bytes")
    @classmethod
    def _usable_within_capacity(cls, v: float | None, info: ValidationInfo) -> float | None:
        cap = info.data.get("capacity_bytes")
        if v is not None and cap is not None and not 0.5 * cap <= v <= cap:
            # drivers reserve a few percent (ECC on GDDR 1/16 more): below half the chip is a typo
            raise ValueError(
                f"usable_bytes {v:.0f} must lie between half of capacity_bytes and capacity_bytes {cap:.0f}"
            )
        return v


class LinkSpec(BaseModel):
    """A data link: scale-up fabric (NVLink/Infinity Fabric) or host link (PCIe)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    bandwidth_bytes_s: float = Field(
        ge=0, allow_inf_nan=False, description="Per GPU, per direction, bytes/s; 0 means the chip has no such link."
    )
    note: str = ""
    latency_s: float = Field(
        default=0.0, ge=0, allow_inf_nan=False, description="Per-message latency of one step over the link, seconds."
    )


class HardwareSpec(BaseModel):
    """One accelerator. ``peak_flops`` holds dense (non-sparse) tensor rates per number format."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str
    vendor: str
    architecture: str
    form_factor: str = ""
    memory: MemorySpec
    peak_flops: dict[str, float]
    l2_bytes: float = Field(ge=0)
    sm_count: int = Field(ge=1, description="Streaming multiprocessors (NVIDIA) or compute units (AMD).")
    interconnect: LinkSpec
    host_link: LinkSpec
    max_gpus_per_node: int = Field(default=8, ge=1, description="GPUs joined by the scale-up fabric.")
    scale_out: LinkSpec | None = Field(
        default=None,
        description="Network between nodes (scale-up domains), per GPU per direction; None: multi-node not modelled.",
    )
    tdp_w: float = Field(gt=0)
    price_per_hour_usd: float = Field(ge=0, description="Indicative on-demand cloud price per GPU-hour.")
    price_source: str = ""
    sources: dict[str, str] = Field(default_factory=dict, description="Citation per field (datasheet).")

    @field_validator("peak_flops")
    @classmethod
    def _known_keys(cls, value: dict[str, float]) -> dict[str, float]:
        for key, flops in value.items():
            if key not in PEAK_KEYS:
                raise ValueError(f"unknown peak key {key!r}; allowed: {', '.join(PEAK_KEYS)}")
            if flops <= 0:
                raise ValueError(f"peak_flops[{key}] must be > 0")
        return value

    def peak(self, key: str) -> float:
        """Dense peak FLOP/s for a compute key, or a clear error naming the keys the chip has."""
        if key not in self.peak_flops:
            raise InfercastError(
                f"{self.id} has no {key} rate; it has {', '.join(self.peak_flops)}",
                field="precision",
                allowed=list(self.peak_flops),
            )
        return self.peak_flops[key]

    @property
    def collective_bandwidth_bytes_s(self) -> float:
        """Bandwidth tensor-parallel collectives run over: the scale-up fabric, else the host link (PCIe); 0: none."""
        return self.interconnect.bandwidth_bytes_s or self.host_link.bandwidth_bytes_s

    def ridge_point(self, key: str) -> float:
        """Arithmetic intensity (FLOP/byte) where compute and HBM ceilings meet."""
        return self.peak(key) / self.memory.bandwidth_bytes_s


def load_hardware_file(path: str | Path) -> list[HardwareSpec]:
    """Load user-defined hardware from a YAML file (a list of entries, or one mapping)."""
    from infercast.files import load_yaml  # one-line errors: missing, folder, non-UTF-8, .inf/.nan, too deep
    from infercast.specs.plausible import check_hardware

    path = Path(path)
    raw = load_yaml(path, "hardware file")
    entries = raw if isinstance(raw, list) else [raw]
    out = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise InfercastError(f"{path}: each entry must be a mapping", field="hardware file")
        try:
            spec = HardwareSpec.model_validate(entry)
        except Exception as exc:  # pydantic ValidationError: report the first field
            raise InfercastError(f"{path}: {_first_error(exc)}", field="hardware file") from None
        check_hardware(spec, str(path))
        out.append(spec)
    return out


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        err = errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        return f"{loc}: {err.get('msg')}"
    return str(exc).splitlines()[0]
