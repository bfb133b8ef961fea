"""Plausible ranges for accelerator numbers read from user YAML: a value outside is a typo, not a chip.

The bounds sit about two orders of magnitude beyond the smallest and largest parts in the catalog (T4:
16 GiB, 320 GB/s, 65 TFLOP/s fp16; GB200: 192 GB, 8 TB/s, ~10 PFLOP/s dense fp4), so any real or
near-future accelerator passes while ``1e-300`` bandwidths, ``1e300``-byte memories or ``.inf`` prices,
which would give NaN or absurd latencies downstream, are refused with the field named.
"""

from __future__ import annotations

from typing import Any

from infercast.errors import InfercastError

RANGES: dict[str, tuple[float, float, str]] = {
    "memory.capacity_bytes": (1e8, 1e14, "bytes"),
    "memory.bandwidth_bytes_s": (1e9, 1e15, "bytes/s"),
    "peak_flops": (1e9, 1e18, "FLOP/s"),
    "l2_bytes": (0.0, 1e11, "bytes"),
    "sm_count": (1, 1e5, ""),
    "interconnect.bandwidth_bytes_s": (0.0, 1e14, "bytes/s (0: no link)"),
    "host_link.bandwidth_bytes_s": (0.0, 1e14, "bytes/s (0: no link)"),
    "max_gpus_per_node": (1, 1e5, ""),
    "tdp_w": (1.0, 1e5, "W"),
    "price_per_hour_usd": (0.0, 1e4, "USD/h"),
}
"""Field path -> (lowest, highest, unit); ``peak_flops`` applies to every format key."""

MIN_LINK_BYTES_S = 1e6
"""A link, when present (> 0), carries at least 1 MB/s."""


def _values(spec: Any, path: str) -> list[tuple[str, float]]:
    obj = spec
    for part in path.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, dict):
        return [(f"{path}.{k}", float(v)) for k, v in obj.items()]
    return [(path, float(obj))]


def check_hardware(spec: Any, where: str, field: str = "hardware file") -> None:
    """Refuse a :class:`~infercast.specs.hardware.HardwareSpec` with a number outside :data:`RANGES`."""
    for path, (low, high, unit) in RANGES.items():
        for name, value in _values(spec, path):
            bad = not (low <= value <= high)
            if path.endswith("link.bandwidth_bytes_s") and 0 < value < MIN_LINK_BYTES_S:
                bad = True
            if bad:
                raise InfercastError(
                    f"{where}: {spec.id}.{name} = {value:g} is outside the plausible range "
                    f"[{low:g}, {high:g}]{' ' + unit if unit else ''}",
                    field=field,
                )
