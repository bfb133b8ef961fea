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


class LinearDecodeRun(DecodeRun):
    """A :class:`DecodeRun` with one context-dependent operator whose binding ceiling does not change over the
    first ``horizon`` steps (the common case): step times are then one line, and totals and deadlines follow
    from the arithmetic series and its quadratic. Falls back to the general formulas otherwise."""

    __slots__ = ("base", "slope")

    def __init__(self, table: DecodeTable, n: int, s: float, horizon: int):
        self.n = n
        self.const = table.constant_f[n]
        cs, ms = table.cs_f[0], table.ms_f[0]
        a, da = table.c0_f[0][n] + cs * s, cs * n
        b, db = table.m0_f[0][n] + ms * s, ms * n
        self.lines = [(a, da, b, db)]
        last = max(horizon, 1) - 1
        if (a >= b) == (a + da * last >= b + db * last):  # one line on top over the whole horizon
            self.base, self.slope = (self.const + a, da) if a >= b else (self.const + b, db)
        else:
            self.base = None

    def step(self, j: int) -> float:
        if self.base is None:
            return DecodeRun.step(self, j)
        return self.base + self.slope * j

    def total(self, k: int) -> float:
        if self.base is None:
            return DecodeRun.total(self, k)
        return k * self.base + self.slope * k * (k - 1) / 2

    def steps_until(self, span: float, cap: int, first: float | None = None) -> int:
        if self.base is None:
            return DecodeRun.steps_until(self, span, cap, first)
        if span <= 0:
            return 1
        base, slope = self.base, self.slope
        if slope > 0:  # k·base + slope·k(k-1)/2 >= span
            half = slope / 2
            k = math.ceil((-(base - half) + math.sqrt((base - half) ** 2 + 4 * half * span)) / (2 * half))
        else:
            k = math.ceil(span / base)
        k = min(max(k, 1), cap)
        while k > 1 and self.total(k - 1) >= span:  # rounding guards: the fewest steps that reach the span
            k -= 1
        while k < cap and self.total(k) < span:
            k += 1
        return k
