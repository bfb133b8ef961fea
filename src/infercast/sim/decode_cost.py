"""Decode-step times over spans of steps in closed form (pure Python floats: no NumPy per call).

A decode-only step of n sequences costs ``K[n] + Σ_v max(c_v + s_c·S + w_c·Sw, m_v + s_m·S + w_m·Sw)`` (each
coefficient by n) where
S and Sw are the context sums (:class:`~infercast.cost.compiled.DecodeTable`, derived from the step cost
model). Over a span without events S and Sw grow linearly, so each term is the max of two lines in the step
index and the span's total time, or the number of steps before a deadline, follow in O(1).

The decode runner handles the common case inline — one context-dependent operator whose binding line
stays on top over the span, so step times form one arithmetic series — and solves deadlines with
:func:`steps_to_reach`; :class:`DecodeSpan` is the general case.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from infercast.cost.cache import SpecCache
from infercast.cost.compiled import DecodeTable, compile_scalar
from infercast.cost.series import sum_max_lines
from infercast.cost.step import StepCostModel

StepFn = Callable[..., float]
"""A compiled step-time function: keyword per step feature (:func:`infercast.cost.compiled.compile_scalar`)."""

_compiled: SpecCache[tuple[StepFn, DecodeTable]] = SpecCache(64)


def compiled_costs(model: StepCostModel, max_seqs: int, scale: float = 1.0) -> tuple[StepFn, DecodeTable]:
    """``compile_scalar(model)`` and ``DecodeTable(model, max_seqs)``, built once and shared by every replica
    (and every simulation) with the same cost model (:func:`infercast.cost.step.cost_model` returns one object
    per deployment and profile) and sequence limit. Both values are read-only. ``scale`` multiplies every step
    time (``EngineConfig.step_time_scale``): the one place the simulator's step prices are read from."""
    if scale != 1.0:
        return _compiled.get((model,), (max_seqs, scale), lambda: _scaled(compiled_costs(model, max_seqs), scale))
    return _compiled.get((model,), (max_seqs,), lambda: (compile_scalar(model), DecodeTable(model, max_seqs)))


def _scaled(costs: tuple[StepFn, DecodeTable], scale: float) -> tuple[StepFn, DecodeTable]:
    step_fn, table = costs

    def scaled_step(**features: float) -> float:
        return step_fn(**features) * scale

    return scaled_step, table.scaled(scale)


class DecodeSpan:
    """Step times of a span of decode-only steps with n sequences, starting at context sums (S, Sw).

    ``ds``/``dsw`` are how much S and Sw grow per step (n and the number of sequences below the window).
    """

    __slots__ = ("const", "lines", "n")

    def __init__(self, table: DecodeTable, n: int, s: float, sw: float, ds: float, dsw: float):
        self.n = n
        self.const = table.constant_f[n]
        cs, cw, ms, mw = table.cs_f, table.cw_f, table.ms_f, table.mw_f
        self.lines = [
            (
                c0[n] + cs[v][n] * s + cw[v][n] * sw,
                cs[v][n] * ds + cw[v][n] * dsw,
                m0[n] + ms[v][n] * s + mw[v][n] * sw,
                ms[v][n] * ds + mw[v][n] * dsw,
            )
            for v, (c0, m0) in enumerate(zip(table.c0_f, table.m0_f, strict=True))
        ]

    def step(self, j: int) -> float:
        """Time of step j of the span."""
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


def steps_to_reach(base: float, slope: float, span: float, cap: int) -> int:
    """Fewest steps (1..cap) of times ``base + j·slope`` (j = 0, 1, ...) whose sum reaches ``span``; cap if
    they never do. The steps of a decode span whose binding ceiling does not change (one line on top) take
    these times: the root of ``k·base + slope·k(k-1)/2 = span``, then guards against rounding. ``base`` > 0
    and ``slope`` >= 0 (step times are positive and grow with the context)."""
    if span <= 0:
        return 1
    # positive root of (slope/2)·k² + b·k - span = 0, b = base - slope/2, in the form without cancellation:
    # no division by the slope when b >= 0 (always, in practice: a step grows by far less than it takes)
    b = base - slope / 2
    root = math.sqrt(b * b + 2 * slope * span)
    k = math.ceil(2 * span / (b + root) if b >= 0 else (root - b) / slope)
    k = min(max(k, 1), cap)
    while k > 1 and (k - 1) * base + slope * (k - 1) * (k - 2) / 2 >= span:  # the fewest steps
        k -= 1
    while k < cap and k * base + slope * k * (k - 1) / 2 < span:
        k += 1
    return k
