"""Display helpers: one SI prefix table for counts, bytes and pint quantities; fixed and significant-digit times."""

from __future__ import annotations

import math

import pytest

from infercast.display import fmt_bytes, fmt_count, fmt_time, si_prefix
from infercast.units import quantity, to_compact_si


@pytest.mark.parametrize(
    ("seconds", "fixed", "compact"),
    [
        (2.1712, "2.17 s", "2.17 s"),
        (0.4213, "421.30 ms", "421 ms"),
        (0.05, "50.00 ms", "50 ms"),
        (0.00682, "6.82 ms", "6.82 ms"),
        (1e-4, "100.0 µs", "100 µs"),
        (3.5e-5, "35.0 µs", "35 µs"),
        (math.nan, "-", "-"),
    ],
)
def test_fmt_time(seconds, fixed, compact):
    assert fmt_time(seconds) == fixed
    assert fmt_time(seconds, sig=3) == compact


@pytest.mark.parametrize(
    ("n", "fixed", "compact"),
    [
        (146.2e9, "146.20 GB", "146 GB"),
        (9.31e9, "9.31 GB", "9.31 GB"),
        (131072, "131.07 kB", "131 kB"),
        (512, "512 B", "512 B"),
        (2.5e15, "2.50 PB", "2.5 PB"),
    ],
)
def test_fmt_bytes(n, fixed, compact):
    assert fmt_bytes(n) == fixed
    assert fmt_bytes(n, sig=3) == compact


def test_one_prefix_table_for_counts_bytes_and_quantities():
    for value in (1.0, 999.0, 1e3, 8.03e9, 29.7e12, 3e15):
        prefix, scale = si_prefix(value)
        assert 1 <= value / scale < 1000 or prefix == "P"
        assert fmt_count(value).endswith(prefix) or prefix == ""
        assert f"{to_compact_si(quantity(value, 'B'), 'B').units:~P}" == f"{prefix}B"
    assert fmt_count(29.7e12, "FLOP") == "29.70 TFLOP"
