"""Decode-step times over runs of steps in closed form (pure Python floats: no NumPy per call).

A decode-only step of n sequences costs ``K[n] + Σ_v max(c_v + s_c·S + w_c·Sw, m_v + s_m·S + w_m·Sw)`` where
S and Sw are the context sums (:class:`~infercast.cost.compiled.DecodeTable`, derived from the step cost
model). Over a run without events S and Sw grow linearly, so each term is the max of two lines in the step
index and the run's total time, or the number of steps before a deadline, follow in O(1).
"""

from __future__ import annotations

import math

from infercast.cost.compiled import DecodeTable
from infercast.cost.series import sum_max_lines


class DecodeRun:
    """Step times of a run of decode-only steps with n sequences, starting at context sums (S, Sw).

    ``ds``/``dsw`` are how much S and Sw grow per step (n and the number of sequences below the window).
    """

    __slots__ = ("const", "lines", "n")

    def __init__(self, table: DecodeTable, n: int, s: float, sw: float, ds: float, dsw: float):
        self.n = n
        self.const = table.constant_f[n]
        cs, cw, ms, mw = table.cs_f, table.cw_f, table.ms_f, table.mw_f
        self.lines = [
            (c0[n] + cs[v] * s + cw[v] * sw, cs[v] * ds + cw[v] * dsw, m0[n] + ms[v] * s + mw[v] * sw,
             ms[v] * ds + mw[v] * dsw)
            for v, (c0, m0) in enumerate(zip(table.c0_f, table.m0_f, strict=True))
        ]  # fmt: skip

    def step(self, j: int) -> float:
        """Time of step j of the run."""
        t = self.const
        for a, da, b, db in self.lines:
            x, y = a + j * da, b + j * db
            t += x if x > y else y
        return t

    def total(self, k: int) -> float:
        """Time of steps 0..k-1."""
        t = self.const * k
        for a, da, b, db in self.lines:
            t += sum_max_lines(a, da, b, db, k)
        return t

    def total_after_first(self, k: int) -> float:
        """Time of steps 1..k-1."""
        return self.total(k) - self.step(0)

    def steps_until(self, span: float, cap: int, first: float | None = None) -> int:
        """Fewest steps (>= 1, <= cap) whose total time reaches ``span`` (cap if it never does)."""
        if span <= 0:
            return 1
        if first is None:
            first = self.step(0)
        hi = math.ceil(span / first)  # steps only get longer, so hi steps always suffice
        if hi >= cap:
            if self.total(cap) < span:
                return cap
            hi = cap
        elif hi <= 1:
            return 1
        # usually hi itself: check that hi - 1 steps fall short, else search down
        if self.total(hi - 1) < span:
            return hi
        lo = max(1, math.ceil(span / self.step(hi - 1)))
        hi -= 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.total(mid) >= span:
                hi = mid
            else:
                lo = mid + 1
        return lo
