"""Prediction vs measurement, per point and summarised by metric (median / p90 absolute % error).

Points of a metric the error bands cover (TTFT and TPOT of serving and closed-loop runs) also carry the band
``predict``/``simulate`` would print for their regime (:func:`infercast.analysis.error_bands.confidence`), and
the summary says how many points fell inside its p90: about 90 % where the bands are honest, on data the bands
were not measured on too."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from infercast.analysis.error_bands import ErrorBand, Regime, confidence, load_level
from infercast.calibrate.predict import metric_of, predict_located, serving_notes
from infercast.cost.profile import CostProfile
from infercast.errors import InfercastError
from infercast.records.record import GROUP_FIELDS, Record


@dataclass(frozen=True)
class Comparison:
    """One measured point and what the model predicts for it."""

    record: Record
    predicted: float
    measured: float
    band: ErrorBand | None = None
    """The expected error a prediction of this regime prints (None: a metric the bands do not cover)."""
    cliff: str | None = None
    """The cause (``"kv"``, ``"slots"``) of the cliff warning the point's simulation carries; None: none (or not a
    serving point)."""
    burst: float | None = None
    """Where the point's simulation notes that its mean TTFT is mostly the opening burst, the mean TTFT (seconds)
    of the requests after it (serving TTFT points only); None: no such note."""

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
            "ep": r.ep,
            "attention_dp": r.attention_dp,
            "batch": r.in_flight,
            "input_len": r.input_len,
            "output_len": r.output_len,
            "context": r.context,
            "op": r.op,
            "measured": self.measured,
            "predicted": self.predicted,
            "error": self.error,
            "band_typical": self.band.typical if self.band else None,
            "band_p90": self.band.p90 if self.band else None,
            "cliff": self.cliff,
            "burst_rest_ttft_s": self.burst,
            "source": r.source,
        }

    @property
    def within_band(self) -> bool | None:
        """Whether the error lies inside the band's p90 (None without a band)."""
        return abs(self.error) <= self.band.p90 if self.band else None


def compare(records: Sequence[Record], profiles: dict[str, CostProfile] | None = None) -> list[Comparison]:
    """Predict every record (with ``profiles`` keyed 'gpu/engine', else the installed profiles); errors name the
    record's ``path:row``."""
    return [comparison(r, profiles) for r in records]


def comparison(rec: Record, profiles: dict[str, CostProfile] | None = None) -> Comparison:
    """One record, predicted (an InfercastError naming the record's ``path:row`` where refused), with its band."""
    predicted = predict_located(rec, profiles)  # simulates a serving record; the cliff's cause reads that run
    return Comparison(rec, predicted, rec.value_si, band_of(rec), *serving_notes(rec, profiles))


@dataclass(frozen=True)
class Unpredicted:
    """A measured point infercast cannot predict, and why (it does not fit, a format the GPU lacks, ...)."""

    record: Record
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"where": self.record.where, "kind": self.record.kind, "reason": self.reason}


def compare_each(
    records: Sequence[Record], profiles: dict[str, CostProfile] | None = None, workers: int = 1
) -> tuple[list[Comparison], list[Unpredicted]]:
    """:func:`compare`, except that a point whose prediction is refused is listed with its reason rather than
    stopping the others (a published table holds layouts infercast refuses, e.g. ones its memory model says do
    not fit). ``workers`` > 1: predicted in that many processes, the results in record order as one process
    gives them; the records of one row (a closed-loop row's TTFT and TPOT share one simulation) stay together."""
    indexed = list(enumerate(records))
    if workers <= 1 or len(records) < 2:
        done = _compare_part(indexed, profiles)
    else:
        rows_of: dict[str, list[tuple[int, Record]]] = {}
        for i, r in indexed:
            rows_of.setdefault(r.origin or f"#{i}", []).append((i, r))
        runs = list(rows_of.values())
        size = -(-len(runs) // (workers * 4))
        parts = [[item for run in runs[k : k + size] for item in run] for k in range(0, len(runs), size)]
        with ProcessPoolExecutor(workers) as pool:
            done = [item for part in pool.map(_compare_part, parts, [profiles] * len(parts)) for item in part]
    done.sort(key=lambda item: item[0])
    rows = [c for _, c in done if isinstance(c, Comparison)]
    refused = [u for _, u in done if isinstance(u, Unpredicted)]
    return rows, refused


def _compare_part(
    items: list[tuple[int, Record]], profiles: dict[str, CostProfile] | None
) -> list[tuple[int, Comparison | Unpredicted]]:
    """(index, comparison or refusal) for each record of one task."""
    out: list[tuple[int, Comparison | Unpredicted]] = []
    for i, r in items:
        try:
            out.append((i, comparison(r, profiles)))
        except InfercastError as exc:
            out.append((i, Unpredicted(r, str(exc))))
    return out


BAND_METRICS = {"serving_ttft": "ttft", "serving_tpot": "tpot"}
"""Record kinds whose predictions carry an error band, and the band's metric."""


def band_of(rec: Record) -> ErrorBand | None:
    """The error band that ``predict`` prints for a serving or closed-loop record's regime (GPU fitted or not,
    engine, load, TP; the held-out band where the record's GPU or model is outside the serving calibration)."""
    metric = BAND_METRICS.get(rec.kind)
    if metric is None:
        return None
    load = rec.in_flight
    regime = Regime(rec.gpu, rec.engine, tp=rec.tp, concurrency=load, model=rec.model or None)
    conf = confidence(regime, metrics=(metric,))
    return conf.bands.get(metric)


def group_key(row: Comparison, by: Sequence[str]) -> tuple[str, ...]:
    """The values of ``by`` (names in :data:`GROUP_FIELDS`) for one point."""
    rec = row.record
    return tuple(load_level(rec.in_flight) if f == "load" else str(getattr(rec, f)) for f in by)


def group_fields(by: str) -> list[str]:
    """The fields of a comma-separated ``--by`` value, each one of :data:`GROUP_FIELDS` (else refused, naming it)."""
    fields = [f.strip() for f in by.split(",") if f.strip()]
    unknown = [f for f in fields if f not in GROUP_FIELDS]
    if unknown:
        raise InfercastError(
            f"cannot group by {', '.join(unknown)}; allowed: {', '.join(GROUP_FIELDS)}",
            field="by",
            allowed=GROUP_FIELDS,
        )
    return fields


def summarize_by(rows: Sequence[Comparison], by: Sequence[str]) -> list[dict[str, object]]:
    """:func:`summarize` per group of points sharing the values of ``by`` (fields of :data:`GROUP_FIELDS`; sorted
    by group, then metric)."""
    groups: dict[tuple[str, ...], list[Comparison]] = {}
    for row in rows:
        groups.setdefault(group_key(row, by), []).append(row)
    out = []
    for key in sorted(groups):
        for metric, stats in summarize(groups[key]).items():
            if metric != "all":
                out.append({"group": dict(zip(by, key, strict=True)), "metric": metric, **stats})
    return out


def summarize(rows: Sequence[Comparison]) -> dict[str, dict[str, float]]:
    """Per metric: number of points, median and p90 absolute percentage error, signed median, and where points
    carry an error band, how many (``banded_points``) and the share inside its p90 (``within_p90_band``)."""
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
        inside = [r.within_band is True for r in rows if (metric == "all" or r.metric == metric) and r.band is not None]
        if inside:
            out[metric]["banded_points"] = len(inside)
            out[metric]["within_p90_band"] = float(np.mean(inside))
    return out
