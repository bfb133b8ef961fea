"""The web UI's one door into the measurement side (benchmark readers in records/, validation and fitting in
calibrate/): the public API has no entry for these yet; only this module names their modules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infercast.calibrate.profile_fit import fit, write_gpu_profile
from infercast.calibrate.validation import compare_each, summarize
from infercast.records.bench_results import FORMATS, RunFacts, load_bench_records

BENCH_FORMATS = FORMATS
"""auto, vllm (``vllm bench serve --save-result``), guidellm, aiperf."""


def records(path: str, fmt: str, facts: dict[str, Any]) -> list[Any]:
    """The load points of one benchmark result file as measurement records (``facts``: what the file cannot say:
    model, gpu, tp, ep, precision, engine, concurrency, request_rate)."""
    return load_bench_records([Path(path)], RunFacts(**facts), fmt)


def compare(recs: list[Any]) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
    """(predicted vs measured per point, reasons points were not predicted, error summary by metric)."""
    rows, refused = compare_each(recs, None, workers=1)
    return [r.to_dict() for r in rows], [u.reason for u in refused], summarize(rows) if rows else {}


def fit_profile(recs: list[Any], gpu: str, out: Path) -> dict[str, Any]:
    """Fit this GPU's profile on these points only and write it to ``out``; the fitted values, their priors,
    the error before and after, and the fit's warnings."""
    import numpy as np

    result = fit(recs, gpus=[gpu], source="web UI upload")
    write_gpu_profile(result, gpu, out, with_engines=True)
    before = float(np.median(np.abs(np.exp(result.before) - 1)))
    after = float(np.median(np.abs(np.exp(result.after) - 1)))
    notes = [f"few points: {line}" for line in result.underdetermined([gpu])]
    if not result.converged:
        notes.append(f"the least-squares fit did not converge: {result.message}")
    return {"values": result.values, "priors": result.priors, "before": before, "after": after, "notes": notes}
