"""Measured latency curves: time of one kernel as a function of one size, interpolated from a table.

Used where a roofline line cannot follow the data, e.g. an all-reduce whose latency is flat up to tens of
kilobytes (one-shot kernel), then grows with the message (two-shot, then bandwidth-bound). Between table
points the time is linear in the size (a local alpha + beta·x); below the first point it is the first
point's time (the latency floor); above the last it continues with the last segment's slope (the
bandwidth the largest messages reached). Tables are cleaned to be non-decreasing (a measurement may not
say that a bigger message is faster), so every curve is monotone and exact at its kept points.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


def monotone_floor(seconds: Sequence[float]) -> list[float]:
    """Each point lowered to the smallest time of any bigger size (suffix minimum): removes measurement
    spikes (e.g. one 38 us point among 3 us ones) without raising any point."""
    out = list(seconds)
    for i in range(len(out) - 2, -1, -1):
        out[i] = min(out[i], out[i + 1])
    return out


@dataclass(frozen=True)
class Curve:
    """Piecewise-linear, non-decreasing time(size) through measured points (sizes strictly increasing)."""

    sizes: tuple[float, ...]
    seconds: tuple[float, ...]
    source: str = ""
    slopes: tuple[float, ...] = field(init=False, repr=False, compare=False)
    """Seconds per unit size of each segment, then the slope used beyond the table."""
    _arrays: tuple[np.ndarray, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.sizes) != len(self.seconds) or not self.sizes:
            raise ValueError("a curve needs as many sizes as times, at least one")
        if any(b <= a for a, b in zip(self.sizes, self.sizes[1:], strict=False)):
            raise ValueError("curve sizes must increase strictly")
        if any(b < a for a, b in zip(self.seconds, self.seconds[1:], strict=False)) or self.seconds[0] < 0:
            raise ValueError("curve times must be >= 0 and non-decreasing (use monotone_floor)")
        xs, ts = self.sizes, self.seconds
        seg = [(ts[i + 1] - ts[i]) / (xs[i + 1] - xs[i]) for i in range(len(xs) - 1)]
        # the last entry (slope beyond the table) repeats the last segment's (0 for a one-point curve)
        object.__setattr__(self, "slopes", (*seg, seg[-1] if seg else 0.0))
        object.__setattr__(self, "_arrays", (np.asarray(xs), np.asarray(ts), np.asarray(self.slopes)))

    @classmethod
    def from_points(cls, sizes: Sequence[float], seconds: Sequence[float], source: str = "") -> Curve:
        """Sort by size, average repeated sizes, and make the times non-decreasing."""
        acc: dict[float, list[float]] = {}
        for x, t in zip(sizes, seconds, strict=True):
            acc.setdefault(float(x), []).append(float(t))
        xs = sorted(acc)
        ts = monotone_floor([sum(acc[x]) / len(acc[x]) for x in xs])
        return cls(tuple(xs), tuple(ts), source)

    def __call__(self, size: np.ndarray) -> np.ndarray:
        """Vectorised time at ``size`` (same arithmetic as :meth:`scalar`, so both agree bit for bit)."""
        xs, ts, sl = self._arrays
        x = np.maximum(np.asarray(size, dtype=float), xs[0])
        i = np.searchsorted(xs, x, side="right") - 1
        return ts[i] + (x - xs[i]) * sl[i]

    def scalar(self, size: float) -> float:
        """Time at one size, in plain floats (the simulator's hot path)."""
        xs = self.sizes
        if size <= xs[0]:
            return self.seconds[0]
        i = bisect_right(xs, size) - 1
        return self.seconds[i] + (size - xs[i]) * self.slopes[i]

    def scaled(self, factor: float, source: str) -> Curve:
        """The same curve with every time multiplied by ``factor`` (> 0)."""
        return Curve(self.sizes, tuple(t * factor for t in self.seconds), source)

    def plus(self, other: Curve, size_scale: float, source: str) -> Curve:
        """time(x) = self(x) + other(x · size_scale), on the union of both size grids (hierarchical collectives:
        an intra-node step on the whole message plus an inter-node step on a share of it)."""
        grid = sorted(set(self.sizes) | {s / size_scale for s in other.sizes})
        xs = np.asarray(grid)
        ts = self(xs) + other(xs * size_scale)
        return Curve.from_points(grid, ts.tolist(), source)


def lerp_curves(a: Curve, b: Curve, w: float, source: str) -> Curve:
    """(1 - w)·a + w·b on the union of both grids, 0 <= w <= 1 (a group size between two measured ones)."""
    grid = sorted(set(a.sizes) | set(b.sizes))
    xs = np.asarray(grid)
    return Curve.from_points(grid, ((1 - w) * a(xs) + w * b(xs)).tolist(), source)
