"""Human formatting of sizes, times and rates for tables (presentation only; core math stays in floats)."""

from __future__ import annotations

import math


def fmt_bytes(n: float) -> str:
    """SI bytes: 16.06 GB, 131.1 kB."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_time(s: float) -> str:
    """Seconds in the most readable unit: 8.35 ms, 2.1 s, 35 µs."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} µs"


def fmt_count(n: float, unit: str = "") -> str:
    """Large counts with SI prefixes: 29.7 T, 8.03 G."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {prefix}{unit}"
    return f"{n:.3g} {unit}".strip()


def fmt_pct(x: float) -> str:
    return f"{x * 100:.0f}%"
