"""`infercast calibrate` and `infercast validate`: fit the cost model to measurements, and check it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from infercast.cli.common import JSON_HELP, console, emit_json
from infercast.errors import InfercastError
from infercast.measure.calibrate import PROFILE_DIR, build_profiles, fit, write_gpu_profile
from infercast.measure.predictors import PREDICTABLE
from infercast.measure.records import Record, read_records
from infercast.measure.validate import compare, summarize


def _load(paths: list[Path]) -> list[Record]:
    if not paths:
        raise InfercastError("give at least one measurement CSV", field="data")
    files: list[Path] = []
    for p in paths:
        files.extend(sorted(p.rglob("*.csv")) if p.is_dir() else [p])
    return [r for f in files for r in read_records(f)]


def calibrate(
    data: Annotated[list[Path], typer.Option("--data", help="Measurement CSV files or folders (repeatable).")],
    gpu: Annotated[list[str] | None, typer.Option("--gpu", help="Only these GPUs (repeatable).")] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Folder for the profile YAMLs (default: install into the package so predictions use them)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Fit and report; write nothing.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Fit per-GPU efficiency/overhead parameters (least squares on log error) and write the profiles."""
    records = _load(data)
    result = fit(records, gpus=gpu or None, source=", ".join(str(p) for p in data))
    written = []
    if not dry_run:
        folder = out or PROFILE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        for g in sorted({r.gpu for r in result.records}):
            written.append(str(write_gpu_profile(result, g, folder / f"{g}.yaml", with_engines=True)))
    before = np.abs(np.exp(result.before) - 1)
    after = np.abs(np.exp(result.after) - 1)
    payload = {
        "points": len(result.records),
        "skipped_points": len(result.skipped),
        "median_abs_error_before": float(np.median(before)),
        "median_abs_error_after": float(np.median(after)),
        "fitted": result.values,
        "priors": result.priors,
        "written": written,
    }
    if json_out:
        emit_json(payload)
        return
    t = Table(title=f"Calibration on {len(result.records)} points")
    for col in ("parameter", "prior", "fitted"):
        t.add_column(col, justify="left" if col == "parameter" else "right")
    for name, value in sorted(result.values.items()):
        t.add_row(name, f"{result.priors[name]:.4g}", f"{value:.4g}")
    console.print(t)
    console.print(f"median |error|: {np.median(before):.1%} before -> {np.median(after):.1%} after"
                  + (f"; wrote {', '.join(written)}" if written else " (dry run)"))  # fmt: skip


def validate(
    data: Annotated[list[Path], typer.Option("--data", help="Measurement CSV files or folders (repeatable).")],
    points: Annotated[bool, typer.Option("--points", help="Also list every point.")] = False,
    priors_only: Annotated[
        bool, typer.Option("--priors", help="Use priors, not the installed fitted profiles.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Prediction vs measurement per point; median and p90 absolute % error by metric."""
    records = [r for r in _load(data) if r.kind in PREDICTABLE]
    if not records:
        raise InfercastError("no measurements with a static prediction (serving kinds need the simulator)",
                             field="data")  # fmt: skip
    profiles = build_profiles(sorted({(r.gpu, r.engine) for r in records}), {}, "prior") if priors_only else None
    rows = compare(records, profiles)
    summary = summarize(rows)
    if json_out:
        emit_json({"summary": summary, "points": [r.to_dict() for r in rows] if points else None})
        return
    t = Table(title="Prediction vs measurement")
    for col in ("metric", "points", "median |error|", "p90 |error|", "median signed"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for metric, s in summary.items():
        t.add_row(
            metric, str(s["points"]), f"{s['median_ape']:.1%}", f"{s['p90_ape']:.1%}", f"{s['median_signed']:+.1%}"
        )
    console.print(t)
    if points:
        p = Table(title="Points")
        for col in ("metric", "model", "gpu", "engine", "tp", "batch", "in", "out", "measured", "predicted", "error"):
            p.add_column(col)
        for r in rows:
            rec = r.record
            p.add_row(r.metric, rec.model, rec.gpu, rec.engine, str(rec.tp), str(rec.batch), str(rec.input_len),
                      str(rec.output_len), f"{r.measured:.4g}", f"{r.predicted:.4g}", f"{r.error:+.1%}")  # fmt: skip
        console.print(p)
