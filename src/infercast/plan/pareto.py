"""Pareto fronts over the candidates that pass: no other passing candidate is at least as good on both axes
and better on one."""

from __future__ import annotations

import numpy as np


def pareto_mask(x: np.ndarray, y: np.ndarray, *, maximize_x: bool, maximize_y: bool) -> np.ndarray:
    """True where the point (x, y) is not dominated; NaN points are never on the front."""
    x = np.asarray(x, float) * (1 if maximize_x else -1)
    y = np.asarray(y, float) * (1 if maximize_y else -1)
    valid = ~(np.isnan(x) | np.isnan(y))
    mask = np.zeros(x.size, bool)
    idx = np.flatnonzero(valid)
    # sweep in order of x descending (ties: y descending): a point is on the front if its y beats all before it
    order = idx[np.lexsort((-y[idx], -x[idx]))]
    best_y = -np.inf
    last: tuple[float, float] | None = None
    for i in order:
        if y[i] > best_y:
            mask[i] = True
            best_y = y[i]
        elif last is not None and (x[i], y[i]) == last:
            mask[i] = True  # an exact duplicate of a front point is not dominated either
        if mask[i]:
            last = (x[i], y[i])
    return mask
