"""The link KV caches cross from a disaggregated prefill pool to its decode pool (kept apart from
:mod:`infercast.sim.config` so the CLI can show its default without loading the simulator)."""

from __future__ import annotations

from dataclasses import dataclass

from infercast.errors import require_positive_number


@dataclass(frozen=True)
class KVLink:
    """The link KV caches cross from the prefill to the decode pool (per GPU)."""

    bandwidth_bytes_s: float = 50e9
    """Default: one 400 Gb/s InfiniBand NDR port per GPU (50 GB/s), the common disaggregation fabric."""
    latency_s: float = 20e-6
    """Per transfer: RDMA setup and completion notification (tens of microseconds)."""

    def __post_init__(self) -> None:
        bandwidth = require_positive_number("bandwidth_bytes_s", self.bandwidth_bytes_s)
        object.__setattr__(self, "bandwidth_bytes_s", bandwidth)
        object.__setattr__(self, "latency_s", require_positive_number("latency_s", self.latency_s, allow_zero=True))
