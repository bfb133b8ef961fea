"""Prediction vs measurement, per point and summarised by metric (median / p90 absolute % error)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infercast.cost.profile import CostProfile
from infercast.measure.predictors import metric_of, predict_located
from infercast.measure.records import Record


@dataclass(frozen=True)
class Comparison:
    """One measured point and what the model predicts for it."""

    record: Record
    predicted: float
    measured: float

    @property
    def error(self) -> float:
        """Signed relative error (predicted / measured - 1)."""
        return self.predicted / self.measured - 1.0

    @property
    def metric(self) -> str:
        return metric_of(self.record)

    def to_dict(self) -> dict[str, object]:
        r = self.record
        return {
            "metric": self.metric,
            "kind": r.kind,
            "model": r.model,
            "gpu": r.gpu,
            "engine": r.engine,
            "precision": r.precision,
            "tp": r.tp,
            "batch": r.batch,
            "input_len": r.input_len,
            "output_len": r.output_len,
            "context": r.context,
            "op": r.op,
            "measured": self.measured,
            "predicted": self.predicted,
            "error": self.error,
            "source": r.source,
        }


def compare(records: Sequence[Record], profiles: dict[str, CostProfile] | None = None) -> list[Comparison]:
    """Predict every record (with ``profiles`` keyed 'gpu/engine', else the installed profiles); errors name the
    record's ``path:row``."""
    return [Comparison(r, predict_located(r, profiles), r.value_si) for r in records]


def summarize(rows: Sequence[Comparison]) -> dict[str, dict[str, float]]:
    """Per metric: number of points, median and p90 absolute percentage error, and signed median."""
    out: dict[str, dict[str, float]] = {}
    groups: dict[str, list[float]] = {}
    for row in rows:
        groups.setdefault(row.metric, []).append(row.error)
    groups["all"] = [row.error for row in rows]
    for metric, errors in groups.items():
        e = np.asarray(errors)
        out[metric] = {
            "points": int(e.size),
            "median_ape": float(np.median(np.abs(e))) if e.size else float("nan"),
            "p90_ape": float(np.percentile(np.abs(e), 90)) if e.size else float("nan"),
            "median_signed": float(np.median(e)) if e.size else float("nan"),
        }
    return out
