"""Fit the engine-under-load parameters of the serving engines on closed-loop benchmarks.

The GPU's kernel parameters stay as installed (fitted on kernel-level data); per engine, three CPU-side
parameters are fitted on that engine's closed-loop points (mean TTFT and mean TPOT):

- ``request_overhead_s``: API server, tokenisation and client time added to every TTFT (and to every
  closed-loop round trip);
- ``step_overhead_s``: CPU time per engine step not hidden behind the GPU (scheduling, sampling, input
  preparation; engines with async scheduling / overlap hide most of it).

The per-sequence overhead stays at its prior: over these points it cannot be told apart from the per-step
one (both grow with the batch at the loads measured), and two identifiable parameters beat three that trade.

Each engine's fit is separate (its points inform only its own parameters), which keeps every fit small
(2 parameters) and the leave-one-group-out cross-validation of benchmarks/accuracy.py affordable.
"""

from __future__ import annotations

from collections.abc import Sequence

from infercast.measure.calibrate import FitResult, fit
from infercast.measure.records import Record

LOAD_PARAMS = ("request_overhead_s", "step_overhead_s")
"""Engine parameters fitted on closed-loop data (see the module docstring)."""
LOAD_KINDS = ("closed_loop_ttft", "closed_loop_tpot")
MAX_EVALUATIONS = 12
"""Residual evaluations per engine fit (each simulates all of that engine's points, seconds each): four
Gauss-Newton iterations of two parameters, enough for a near-linear problem (the overheads add to TTFT and
TPOT almost linearly)."""


def load_records(records: Sequence[Record]) -> list[Record]:
    """The closed-loop records among ``records``."""
    return [r for r in records if r.kind in LOAD_KINDS]


def fit_engines(records: Sequence[Record], *, source: str = "") -> dict[str, FitResult]:
    """One fit per engine of its :data:`LOAD_PARAMS` on its closed-loop records (kernels as installed)."""
    chosen = load_records(records)
    out = {}
    for engine in sorted({r.engine for r in chosen}):
        mine = [r for r in chosen if r.engine == engine]
        out[engine] = fit(mine, parameters=[f"{engine}:{p}" for p in LOAD_PARAMS], base="kernels",
                          source=source, max_evaluations=MAX_EVALUATIONS)  # fmt: skip
    return out


def fitted_values(results: dict[str, FitResult]) -> dict[str, float]:
    """All engines' fitted values in one dict ('engine:param' -> value)."""
    return {k: v for res in results.values() for k, v in res.values.items()}
