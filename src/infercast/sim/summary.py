"""The typed summary of a simulation: the metrics ``vllm bench serve`` reports, plus queueing, cache,
preemption and saturation figures.

:class:`SimulationSummary` has one attribute per metric and also reads as the (read-only) mapping of its
JSON form (``summary["ttft_s"]["p99"]``, ``dict(summary)``), whose keys stay stable across versions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from infercast.sim.metrics import PERCENTILES

_OPTIONAL = (
    "front_end_busy_fraction",
    "pool_busy_fraction",
    "slo_attainment",
    "slo",
    "offered_rate_req_s",
    "served_to_arrived",
    "served_rate_req_s",
    "saturation_reason",
)
"""Keys the dict form leaves out when None (no front-end; no SLO given; saturation not judged)."""


@dataclass(frozen=True)
class LatencyStats:
    """Mean, standard deviation and percentiles (seconds; NaN without samples)."""

    mean: float
    std: float
    p50: float
    p90: float
    p95: float
    p99: float

    @classmethod
    def from_dict(cls, values: Mapping[str, float]) -> LatencyStats:
        return cls(**{f.name: float(values[f.name]) for f in fields(cls)})

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


if tuple(f"p{p}" for p in PERCENTILES) != tuple(f.name for f in fields(LatencyStats))[2:]:
    raise ImportError("LatencyStats must list the percentiles of infercast.sim.metrics.PERCENTILES")


@dataclass(frozen=True, kw_only=True)
class SimulationSummary(Mapping[str, Any]):
    """Metrics of one simulation (see module docstring). Throughputs are over the benchmark duration."""

    num_requests: int
    completed: int
    duration_s: float
    """From the benchmark's start (the workload's t = 0) to the last completion, as ``vllm bench serve``."""
    request_throughput_req_s: float
    output_throughput_tok_s: float
    total_throughput_tok_s: float
    ttft_s: LatencyStats
    tpot_s: LatencyStats
    itl_s: LatencyStats
    e2e_s: LatencyStats
    queue_s: LatencyStats
    preemptions: int
    prefix_cache_hit_rate: float
    steps: int
    busy_fraction: float
    """Share of the run the replicas' GPUs were running steps (the mean over all replicas, both pools of a
    disaggregated run: ``pool_busy_fraction`` has each pool's)."""
    pool_busy_fraction: dict[str, float] | None = None
    """Disaggregated runs: busy fraction of the prefill pool and of the decode pool (``{"prefill": .., "decode":
    ..}``); None otherwise."""
    front_end_busy_fraction: float | None = None
    """Share of the run the API server's front-end was busy streaming tokens (the busiest replica's); only for an
    engine profile with one (``CostProfile.stream_token_s``)."""
    mean_decode_batch: float
    goodput_req_s: float
    """Requests per second meeting every SLO (all completed requests without SLOs)."""
    slo_attainment: float | None = None
    slo: dict[str, float | None] | None = None
    saturated: bool
    offered_rate_req_s: float | None = None
    served_to_arrived: float | None = None
    served_rate_req_s: float | None = None
    saturation_reason: str | None = None
    _dict: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "_dict":
                continue
            value = getattr(self, f.name)
            if value is None and f.name in _OPTIONAL:
                continue
            out[f.name] = value.to_dict() if isinstance(value, LatencyStats) else value
        object.__setattr__(self, "_dict", out)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (a copy)."""
        return {k: dict(v) if isinstance(v, dict) else v for k, v in self._dict.items()}

    def __getitem__(self, key: str) -> Any:
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)
