"""Exact sums of step costs over runs of steps whose work grows linearly (decode, chunked prefill).

Across the decode phase of a static batch the context grows by one token per step while the number of
tokens per step stays fixed, so every operator's compute and memory times are linear in the step index and
its time is the max of two lines. The sum over n steps then has a closed form: find where the two lines
cross and add two arithmetic series. This makes a whole decode phase cost the same as two step
evaluations, for any output length — it is what lets sweeps evaluate millions of configurations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from infercast.cost.batch import F, StepBatch
from infercast.cost.step import StepCostModel

_FIXED = ("one", "tokens", "sampled", "seqs", "prefill_seqs", "prefill_tokens", "decode_tokens")
_FIXED_IDX = [F[name] for name in _FIXED]


@dataclass(frozen=True)
class RangeSums:
    """Per-operator totals over a run of steps, arrays of shape (n_ops, N); ``time_s`` includes overheads."""

    flops: np.ndarray
    bytes: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    overhead_s: np.ndarray
    time_s: np.ndarray
    engine_overhead_s: np.ndarray
    steps: np.ndarray

    @property
    def total_s(self) -> np.ndarray:
        """Wall time of the run, shape (N,)."""
        return self.time_s.sum(axis=0) + self.engine_overhead_s


def _series(a0: np.ndarray, da: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """sum_{j=p}^{q-1} (a0 + j·da), zero when q <= p."""
    count = np.maximum(q - p, 0)
    return count * a0 + da * (p + q - 1) * count / 2


def sum_max_lines(a0: float, da: float, b0: float, db: float, n: int) -> float:
    """Scalar Σ_{j=0}^{n-1} max(a0 + j·da, b0 + j·db), in plain floats (the simulator's hot path)."""
    if n <= 0:
        return 0.0
    d0, dd = a0 - b0, da - db
    tri = n * (n - 1) / 2
    if dd == 0.0:
        return n * a0 + da * tri if d0 >= 0 else n * b0 + db * tri
    cross = min(max(-d0 / dd, -1.0), n + 1.0)  # clamped: nearly parallel lines cross far away (or at inf)
    if dd > 0:  # line a on top from ceil(cross)
        p = min(max(math.ceil(cross), 0), n)
        return _series_scalar(b0, db, 0, p) + _series_scalar(a0, da, p, n)
    q = min(max(math.floor(cross) + 1, 0), n)  # line a on top before q
    return _series_scalar(a0, da, 0, q) + _series_scalar(b0, db, q, n)


def _series_scalar(a0: float, da: float, p: int, q: int) -> float:
    count = q - p
    return count * a0 + da * (p + q - 1) * count / 2 if count > 0 else 0.0


def sum_max_linear(a0: np.ndarray, da: np.ndarray, b0: np.ndarray, db: np.ndarray, n: np.ndarray) -> np.ndarray:
    """sum_{j=0}^{n-1} max(a0 + j·da, b0 + j·db), elementwise over broadcast arrays."""
    args = (a0, da, b0, db, np.asarray(n, dtype=float))
    elements = np.broadcast(*args)
    if elements.size <= 16:  # a few elements: the scalar formula beats NumPy's per-call overhead
        sums = [sum_max_lines(float(a), float(x), float(b), float(y), int(k)) for a, x, b, y, k in elements]
        return np.array(sums).reshape(elements.shape)
    a0, da, b0, db, n = np.broadcast_arrays(*args)
    d0, dd = a0 - b0, da - db
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cross = np.where(dd != 0, -d0 / np.where(dd != 0, dd, 1.0), 0.0)
    cross = np.clip(cross, -1.0, n + 1.0)
    zero = np.zeros_like(d0)
    # steps where line a is on top: [pa, qa); line b covers the rest of [0, n), one contiguous range
    pa = np.where(dd > 0, np.clip(np.ceil(cross), 0, n), zero)
    qa = np.where(dd < 0, np.clip(np.floor(cross) + 1, 0, n), n)
    flat_a = (dd == 0) & (d0 >= 0)
    flat_b = (dd == 0) & (d0 < 0)
    qa = np.where(flat_b, zero, qa)
    pa = np.where(flat_a, zero, pa)
    qa = np.maximum(qa, pa)
    sum_a = _series(a0, da, pa, qa)
    # b-range: [0, pa) when a starts later, else [qa, n)
    pb = np.where(pa > 0, zero, qa)
    qb = np.where(pa > 0, pa, n)
    sum_b = _series(b0, db, pb, qb)
    return sum_a + sum_b


def sum_steps(model: StepCostModel, first: StepBatch, delta: np.ndarray, n: np.ndarray | float) -> RangeSums:
    """Per-operator totals over steps ``first + j·delta`` for j = 0..n-1, per column.

    ``delta`` (shape of ``first.x``) may change only context-like features (attention pairs and KV reads);
    token counts must stay fixed so that GEMM shapes and efficiencies are constant over the run.
    """
    delta = np.asarray(delta, dtype=float)
    if delta[_FIXED_IDX].any():
        raise ValueError(f"sum_steps: features {_FIXED} must not change across the run")
    start = model.evaluate(model.columns(first), fast=True)
    if not delta.any():
        return sums_from(start, None, n)
    return sums_from(start, model.evaluate(model.columns(StepBatch(first.x + delta)), fast=True), n)


def sums_from(start: tuple[np.ndarray, ...], nxt: tuple[np.ndarray, ...] | None, n: np.ndarray | float) -> RangeSums:
    """Totals over n steps from the evaluated first step and (if the run grows) the second one.

    ``start``/``nxt`` are ``StepCostModel.evaluate`` results (flops, bytes, compute, memory, overhead, engine).
    """
    f0, b0, c0, m0, o0, e0 = start
    if nxt is None and isinstance(n, float | int) and n == 1:  # a single step (prefill without chunking)
        return RangeSums(f0, b0, c0, m0, o0, np.maximum(c0, m0) + o0, e0, np.ones_like(e0))
    nn = np.asarray(n, dtype=float)
    if nn.shape != e0.shape:
        nn = np.broadcast_to(nn, e0.shape)
    time = nn * (np.maximum(c0, m0) + o0)
    if nxt is None:
        return RangeSums(nn * f0, nn * b0, nn * c0, nn * m0, nn * o0, time, nn * e0, nn)
    _, _, c1, m1, _, _ = nxt
    # FLOPs, bytes, compute and memory times grow linearly: one stacked pass over the four
    ops = len(c0)
    first = np.concatenate(start[:4])
    growth = np.concatenate(nxt[:4]) - first
    dc, dm = growth[2 * ops : 3 * ops], growth[3 * ops :]
    varies = ((c1 != c0) | (m1 != m0)).any(axis=1)
    if varies.any():
        time[varies] = sum_max_linear(c0[varies], dc[varies], m0[varies], dm[varies], nn) + nn * o0[varies]
    tri = nn * (nn - 1) / 2
    totals = nn * first + tri * growth
    return RangeSums(
        flops=totals[:ops],
        bytes=totals[ops : 2 * ops],
        compute_s=totals[2 * ops : 3 * ops],
        memory_s=totals[3 * ops :],
        overhead_s=nn * o0,
        time_s=time,
        engine_overhead_s=nn * e0,
        steps=nn,
    )


def add_sums(a: RangeSums, b: RangeSums) -> RangeSums:
    """Element-wise total of two runs."""
    return RangeSums(**{f.name: getattr(a, f.name) + getattr(b, f.name) for f in fields(RangeSums)})


@dataclass(frozen=True)
class LinearRun:
    """Step costs of a run whose work grows linearly, split into a part fixed per step and the operators
    whose compute/memory lines change (shape (n_varying, N)): the total over n steps is ``total(n)``."""

    fixed: np.ndarray
    c0: np.ndarray
    dc: np.ndarray
    m0: np.ndarray
    dm: np.ndarray

    def total(self, n: np.ndarray | float) -> np.ndarray:
        """Wall time of n steps (n broadcasts against the columns, e.g. shape (N, k) with fixed of shape (N, 1))."""
        n = np.asarray(n, dtype=float)
        out = n * self.fixed
        for i in range(self.c0.shape[0]):
            out = out + sum_max_linear(self.c0[i], self.dc[i], self.m0[i], self.dm[i], n)
        return out


def linear_run(model: StepCostModel, first: StepBatch, delta: np.ndarray) -> LinearRun:
    """Decompose the run starting at ``first`` and growing by ``delta`` per step (see :class:`LinearRun`).

    Operators whose work does not change contribute n · t(first); only those that do (attention, as the
    context grows) need the two-line closed form.
    """
    delta = np.asarray(delta, dtype=float)
    _, _, c0, m0, o0, e0 = model.evaluate(model.columns(first), fast=True)
    const = (np.maximum(c0, m0) + o0).sum(axis=0) + e0
    pattern = (np.abs(delta).reshape(delta.shape[0], -1).max(axis=1) > 0).astype(float)
    empty = np.zeros((0, const.size))
    if not pattern.any():
        return LinearRun(const, empty, empty, empty, empty)
    touched = np.abs(model.coef[: 2 * model.n_ops, : pattern.size]) @ pattern
    varies = (touched[: model.n_ops] + touched[model.n_ops :]) > 0
    _, _, c1, m1, _, _ = model.evaluate(model.columns(StepBatch(first.x + delta)), fast=True)
    c0v, m0v = c0[varies], m0[varies]
    fixed = const - np.maximum(c0v, m0v).sum(axis=0)
    return LinearRun(fixed, c0v, c1[varies] - c0v, m0v, m1[varies] - m0v)


def total_steps_time(model: StepCostModel, first: StepBatch, delta: np.ndarray, n: np.ndarray | float) -> np.ndarray:
    """Wall time (s) of ``sum_steps`` without the per-operator detail (the fast path of sweeps)."""
    return linear_run(model, first, delta).total(n)
