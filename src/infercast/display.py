"""Human formatting of sizes, times and rates for tables (presentation only; core math stays in floats)."""

from __future__ import annotations

import math

SI_PREFIXES = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
"""SI prefixes, largest first: the one table behind every compact display (counts, bytes, pint quantities)."""


def si_prefix(x: float) -> tuple[str, float]:
    """The largest SI prefix (and its scale) that keeps ``|x| / scale >= 1``; ``("", 1.0)`` below 1000."""
    for prefix, scale in SI_PREFIXES:
        if abs(x) >= scale:
            return prefix, scale
    return "", 1.0


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _digits(x: float, decimals: int, sig: int | None) -> str:
    """``decimals`` fixed decimals, or (with ``sig``) ``sig`` significant digits without an exponent."""
    if sig is None:
        return f"{x:.{decimals}f}"
    return f"{x:.0f}" if abs(x) >= 10 ** (sig - 1) else f"{x:.{sig}g}"


def fmt_bytes(n: float, sig: int | None = None) -> str:
    """SI bytes: 16.06 GB, 131.07 kB; with ``sig=3``: 146 GB, 9.3 GB."""
    if _missing(n):
        return "-"
    prefix, scale = si_prefix(n)
    if not prefix:
        return f"{n:.0f} B"
    return f"{_digits(n / scale, 2, sig)} {prefix}B"


def fmt_time(s: float, sig: int | None = None) -> str:
    """Seconds in the most readable unit: 8.35 ms, 2.10 s, 35.0 µs; with ``sig=3``: 421 ms, 6.82 ms, 2.17 s."""
    if _missing(s):
        return "-"
    if s >= 1:
        return f"{_digits(s, 2, sig)} s"
    if s >= 1e-3:
        return f"{_digits(s * 1e3, 2, sig)} ms"
    return f"{_digits(s * 1e6, 1, sig)} µs"


def fmt_count(n: float, unit: str = "") -> str:
    """Large counts with SI prefixes: 29.70 T, 8.03 G."""
    prefix, scale = si_prefix(n)
    if not prefix:
        return f"{n:.3g} {unit}".strip()
    return f"{n / scale:.2f} {prefix}{unit}"


def fmt_pct(x: float) -> str:
    return f"{x * 100:.0f}%"
