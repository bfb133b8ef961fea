"""What a unit costs: $/h from GPU prices, $ per million tokens at its max rate, replicas for a target rate."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from infercast.errors import InfercastError, require_positive_number
from infercast.specs.catalog import get_hardware


def gpu_prices(gpus: list[str], overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """$/GPU-hour per GPU id: the catalog's ``price_per_hour_usd`` unless ``overrides`` gives one."""
    if overrides is not None and not isinstance(overrides, Mapping):
        raise InfercastError(f"must map GPU ids to $/GPU-hour, got {overrides!r:.80}", field="prices")
    overrides = {
        get_hardware(k).id: require_positive_number("price", v, allow_zero=True) for k, v in (overrides or {}).items()
    }
    unknown = set(overrides) - {get_hardware(g).id for g in gpus}
    if unknown:
        raise InfercastError(
            f"price given for {', '.join(sorted(unknown))}, which is not among the GPUs planned", field="price"
        )
    return {g: overrides.get(get_hardware(g).id, get_hardware(g).price_per_hour_usd) for g in gpus}


def parse_prices(items: str | list[str] | None) -> dict[str, float]:
    """``"h100-sxm=2.5,h200=3.1"`` (or a list of such) -> {gpu: $/h}."""
    if not items:
        return {}
    parts = items.replace(",", " ").split() if isinstance(items, str) else [p for i in items for p in i.split(",")]
    out: dict[str, float] = {}
    for part in (p.strip() for p in parts if p.strip()):
        gpu, sep, value = part.partition("=")
        if not sep or not gpu.strip():
            raise InfercastError(f"expected GPU=$/h like h100-sxm=2.5, got {part!r}", field="price")
        out[gpu.strip()] = require_positive_number("price", value.strip().lstrip("$"), allow_zero=True)
    return out


def usd_per_mtok(usd_per_hour: float, tok_s: float) -> float:
    """Dollars per million tokens produced at ``tok_s`` by hardware costing ``usd_per_hour``."""
    return usd_per_hour / 3600.0 / tok_s * 1e6 if tok_s > 0 else math.inf


def replicas_needed(target_rate: float, max_rate: float) -> int:
    """Units needed to serve ``target_rate`` when each serves up to ``max_rate`` (at least one)."""
    return max(1, math.ceil(target_rate / max_rate - 1e-9))


def rank_key(
    gpus: int, usd_per_gpu_hour: float, rate: float | None, max_rate: float, mean_output: float
) -> tuple[float, float]:
    """How a unit of ``gpus`` GPUs serving up to ``max_rate`` req/s ranks: (fleet $/h for the target ``rate``
    (0 without one), $/Mtok output); lower is better. Monotone in ``max_rate``, so an upper bound on the
    rate gives a lower bound on the key."""
    unit_h = gpus * usd_per_gpu_hour
    if max_rate <= 0:
        return (math.inf, math.inf)
    fleet = replicas_needed(rate, max_rate) * unit_h if rate is not None else 0.0
    return (fleet, usd_per_mtok(unit_h, max_rate * mean_output))


@dataclass(frozen=True)
class Cutoff:
    """Branch and bound: skip a unit whose key at ``slack`` x its offline throughput is worse than ``best``."""

    best: tuple[float, float]
    rate: float | None
    prices: dict[str, float]
    mean_output: float
    slack: float

    def beaten(self, gpu: str, gpus: int, rate_bound: float) -> bool:
        key = rank_key(gpus, self.prices[gpu], self.rate, rate_bound, self.mean_output)
        return key > self.best
