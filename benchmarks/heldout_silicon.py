"""Held-out check: infercast against the published serving sweeps it was never fitted to.

Usage:  python benchmarks/heldout_silicon.py [--workers 2] [--write] [--limit N]

aiconfigurator-core 0.12.0 ships ``systems/silicon_sample.csv``: closed-loop benchmark points measured by NVIDIA on
H100, H200, B200, B300 and GB200 with TensorRT-LLM, vLLM and SGLang, for 15 models (dense, MoE, MLA, gpt-oss,
the 2026 families). The project calibrates only on the H100 rows that ``../shared/reference/closed_loop_h100.csv``
holds; every other aggregated row (one engine serving prefill and decode) with a recorded concurrency is held
out, and this script predicts each of them as ``infercast validate`` does (read as
``records/silicon_rows.py`` reads the calibration rows: fixed lengths, 10 x C requests, the same engine
settings) and reports median and p90 |error| of mean TTFT and TPOT by GPU, engine and model. Nothing here is
fitted but two things, each with its own left-out figures: the MTP acceptance of each model whose runs drafted
with MTP (TensorRT-LLM DeepSeek-R1, SGLang Qwen3.5; ``benchmarks/mtp_acceptance.py``) and vLLM 0.14's per-token
all-reduce time (``benchmarks/allreduce_token_fit.py``): the numbers say how far the tool carries beyond its
calibration. Disaggregated rows are left out (the
simulator's disaggregated pools take TP only), as are the rows whose concurrency was not recorded.

The same errors, by engine and load, are the error bands that ``predict``, ``simulate`` and ``sweep`` print for a
GPU, a model or an engine release outside the serving calibration (``src/infercast/data/heldout_bands.yaml``,
``analysis/error_bands.py``). They set how sure such a prediction says it is, never what it predicts. The
bands are checked the way the predictions are, on points they were not built from: the "inside p90 band" columns
build each point's band without its model (and, in the summary, without its GPU), and count the points inside it.

A run whose TTFT is mostly queueing for KV blocks or batch slots (``sim/cliff.py``: a cliff) swings with a few
percent of KV pool or step time, so ``simulate`` prints another TTFT band for it: the median and p90 |error| of
mean TTFT over the points here whose simulation is on a cliff of the same cause (the ``cliff`` section of the bands
file), checked the same way (the band built without the point's model, or its GPU).

``--write`` saves the tables to ``benchmarks/heldout_silicon.md`` and the bands to
``src/infercast/data/heldout_bands.yaml``. Needs the ``aiconfigurator`` extra
(``pip install -e '.[aiconfigurator]'``). About 1.5 minutes on two cores.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.analysis.error_bands import HELDOUT_DIMENSIONS, HELDOUT_FILE, find_band, load_level  # noqa: E402
from infercast.calibrate.validation import BAND_METRICS, Comparison, compare_each, summarize_by  # noqa: E402
from infercast.files import atomic_write  # noqa: E402
from infercast.records.kernel_tables import locate  # noqa: E402
from infercast.records.silicon_rows import (  # noqa: E402
    client_capped_sweeps,
    convert_rows,
    from_wheel_row,
    gpu_total_sweeps,
    repeats,
)

CALIBRATION = ROOT.parent / "shared" / "reference" / "closed_loop_h100.csv"
OUT_MD = ROOT / "benchmarks" / "heldout_silicon.md"
OUT_BANDS = ROOT / "src" / "infercast" / "data" / HELDOUT_FILE
CLIFF_CAUSES = ("kv", "slots")
"""The causes of a cliff (:func:`infercast.sim.cliff.find_cliff`): queueing for KV blocks, for batch slots."""
MIN_CLIFF_POINTS = 20
"""A cliff cause needs this many points for a band of its own (else the pooled cliff points give it)."""
LEFT_OUT_MIN_POINTS = 10
"""The fewest cliff points a band built without one model or GPU may rest on (:func:`cliff_coverage`): the check
asks whether the other models' cliff errors cover a model's, and one model can hold over half of all cliff points
(MiniMax-M2.5's vLLM runs: 23 of 42), which would leave the others no band at :data:`MIN_CLIFF_POINTS`."""


def held_out_rows(sample: Path, calibration_ids: set[str]) -> list[dict[str, str]]:
    """The wheel's aggregated rows with a recorded concurrency that the calibration file does not hold, each
    measurement once (``silicon_rows.repeats``), without sweeps that write GPU totals as TP
    (``silicon_rows.gpu_total_sweeps``) or whose clients were capped outside the engine
    (``silicon_rows.client_capped_sweeps``), in the closed-loop row format, as ``validate --data`` reads the
    wheel's file (``silicon_rows.from_wheel_row``)."""
    with sample.open(newline="") as f:
        every = list(csv.DictReader(f))
    checks = zip(repeats(every), gpu_total_sweeps(every), client_capped_sweeps(every), strict=True)
    drop = [any(dropped) for dropped in checks]
    once = [row for row, dropped in zip(every, drop, strict=True) if not dropped]
    rows = (from_wheel_row(row) for row in once if row["id"] not in calibration_ids)
    return [row for row in rows if row is not None]


def regime_of(c: Comparison) -> dict[str, str]:
    """A point's held-out regime (:data:`HELDOUT_DIMENSIONS`)."""
    return {"engine": c.record.engine, "load": load_level(c.record.in_flight)}


def band_rows(compared: Sequence[Comparison]) -> list[dict[str, object]]:
    """Band rows: per metric, median (typical) and p90 |error| by engine x load and every coarser level."""
    rows: list[dict[str, object]] = []
    for metric in ("ttft", "tpot"):
        points = [c for c in compared if BAND_METRICS.get(c.record.kind) == metric]
        for depth in range(len(HELDOUT_DIMENSIONS) + 1):
            dims = HELDOUT_DIMENSIONS[:depth]
            groups: dict[tuple[str, ...], list[float]] = {}
            for c in points:
                regime = regime_of(c)
                groups.setdefault(tuple(regime[d] for d in dims), []).append(abs(c.error))
            for key, errors in sorted(groups.items()):
                a = np.asarray(errors)
                rows.append(
                    {
                        "metric": metric,
                        **dict(zip(dims, key, strict=True)),
                        "typical": round(float(np.median(a)), 4),
                        "p90": round(float(np.percentile(a, 90)), 4),
                        "points": int(a.size),
                    }
                )
    return rows


def with_bands(compared: Sequence[Comparison], left_out: str | None = None) -> list[Comparison]:
    """The points with the band that :func:`band_rows` gives their regime: built from all points, or, with
    ``left_out`` (a record field: model, gpu), from the points that do not share the point's value of it."""
    key = (lambda c: getattr(c.record, left_out)) if left_out else (lambda c: "")
    tables = {
        v: {"bands": band_rows([c for c in compared if key(c) != v or not left_out])}
        for v in {key(c) for c in compared}
    }
    return [
        replace(c, band=find_band(tables[key(c)], BAND_METRICS[c.record.kind], regime_of(c), HELDOUT_DIMENSIONS))
        for c in compared
    ]


def coverage(compared: Sequence[Comparison]) -> dict[str, dict[str, float]]:
    """Per metric, the share of points inside the p90 band: built with the point's model left out, with its GPU
    left out, and from all points (in-sample). A point left without a band (no other model or GPU in its regime)
    counts as outside."""
    runs = {
        "model_left_out": with_bands(compared, "model"),
        "gpu_left_out": with_bands(compared, "gpu"),
        "in_sample": with_bands(compared),
    }
    out: dict[str, dict[str, float]] = {}
    for name, rows in runs.items():
        for metric in ("ttft", "tpot"):
            inside = [bool(c.within_band) for c in rows if BAND_METRICS[c.record.kind] == metric]
            if inside:
                out.setdefault(metric, {})[name] = float(np.mean(inside))
    return out


def cliff_bands(compared: Sequence[Comparison], minimum: int = MIN_CLIFF_POINTS) -> dict[str, dict[str, Any]]:
    """Per cliff cause (:data:`CLIFF_CAUSES`), median (typical) and p90 |error| of mean TTFT over the points whose
    simulation is on that cliff (``Comparison.cliff``); a cause with fewer than ``minimum`` points takes the
    band of all cliff points pooled, and says so. A cause is left out when even the pool is too small."""
    points = [c for c in compared if BAND_METRICS.get(c.record.kind) == "ttft" and c.cliff]
    pooled = [abs(c.error) for c in points]
    out: dict[str, dict[str, Any]] = {}
    for cause in CLIFF_CAUSES:
        own = [abs(c.error) for c in points if c.cliff == cause]
        errors = own if len(own) >= minimum else pooled
        if len(errors) < minimum:
            continue
        a = np.asarray(errors)
        out[cause] = {
            "typical": round(float(np.median(a)), 4),
            "p90": round(float(np.percentile(a, 90)), 4),
            "points": int(a.size),
        }
        if errors is not own:
            out[cause]["pooled"] = (
                f"only {len(own)} {cause} cliff points (fewer than {minimum}): the band of all "
                f"{len(pooled)} cliff points"
            )
    return out


def cliff_coverage(compared: Sequence[Comparison]) -> dict[str, dict[str, Any]]:
    """Per cliff cause and pooled, the share of cliff points inside the p90 of the cliff band (:func:`cliff_bands`)
    built without the point's model, without its GPU, and from all points; a point left without a band counts
    as outside."""
    points = [c for c in compared if BAND_METRICS.get(c.record.kind) == "ttft" and c.cliff]
    out: dict[str, dict[str, Any]] = {}
    for name, left_out in (("model_left_out", "model"), ("gpu_left_out", "gpu"), ("in_sample", None)):
        inside = _inside_left_out(points, left_out)
        for cause in (*CLIFF_CAUSES, "all"):
            chosen = [ok for c, ok in zip(points, inside, strict=True) if cause in ("all", c.cliff)]
            if chosen:
                out.setdefault(cause, {"points": len(chosen)})[name] = round(float(np.mean(chosen)), 3)
    return out


def _inside_left_out(points: Sequence[Comparison], left_out: str | None) -> list[bool]:
    """Per cliff point, whether it is inside the p90 of its cause's cliff band built from the points that do not
    share its ``left_out`` field (model, gpu; None: from all points)."""
    key = (lambda c: getattr(c.record, left_out)) if left_out else (lambda c: "")
    least = LEFT_OUT_MIN_POINTS if left_out else MIN_CLIFF_POINTS
    tables = {
        v: cliff_bands([c for c in points if key(c) != v or not left_out], least) for v in {key(c) for c in points}
    }
    return [_inside_cliff_band(c, tables[key(c)]) for c in points]


def _inside_cliff_band(c: Comparison, bands: dict[str, dict[str, Any]]) -> bool:
    """Whether a cliff point's |error| is inside the p90 of its cause's band (False where it has none)."""
    band = bands.get(str(c.cliff))
    return band is not None and abs(c.error) <= float(band["p90"])


def table(stats: Sequence[dict[str, object]], title: str) -> list[str]:
    """Markdown rows of :func:`summarize_by`'s groups: points, median / p90 |error|, signed median, share inside
    the points' p90 bands (:func:`with_bands`)."""
    lines = [
        f"| {title} | metric | points | median / p90 \\|error\\| | signed median | inside p90 band (model left out) |",
        "|---|---|---|---|---|---|",
    ]
    for row in stats:
        group = " ".join(str(v) for v in row["group"].values()) if row["group"] else "all"
        metric = str(row["metric"]).split(" (")[0].removeprefix("closed-loop ")
        inside = f"{100 * row['within_p90_band']:.0f} % of {row['banded_points']}" if "banded_points" in row else "-"
        spread = f"{100 * row['median_ape']:.1f} % / {100 * row['p90_ape']:.1f} %"
        lines.append(
            f"| {group} | {metric} | {row['points']} | {spread} | {100 * row['median_signed']:+.1f} % | {inside} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="predict only every k-th row, k = rows / LIMIT")
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"save the tables to {OUT_MD.relative_to(ROOT)} and the bands to {OUT_BANDS.relative_to(ROOT)}",
    )
    args = parser.parse_args()
    if not CALIBRATION.is_file():
        parser.error(f"needs {CALIBRATION} (the calibration rows, left out here) beside the checkout")
    source = locate()
    sample = source.data.parent / "silicon_sample.csv"
    with CALIBRATION.open(newline="") as f:
        calibration_ids = {row["id"] for row in csv.DictReader(f)}
    rows = held_out_rows(sample, calibration_ids)
    if args.limit and len(rows) > args.limit:
        rows = rows[:: -(-len(rows) // args.limit)]
    t0 = time.perf_counter()
    records, _, unplaced = convert_rows([(f"{sample.name} id {row['id']}", row) for row in rows])
    compared, refused = compare_each(records, None, workers=args.workers)
    seconds = time.perf_counter() - t0
    reasons: dict[str, int] = {}
    for u in refused:
        reason = u.reason.split(": ", 1)[-1]
        reasons[reason[:140]] = reasons.get(reason[:140], 0) + 1
    shares = coverage(compared)
    cliff = {"bands": cliff_bands(compared), "coverage": cliff_coverage(compared)}
    left_out = with_bands(compared, "model")
    inside = "; ".join(
        f"{metric.upper()} {100 * c['model_left_out']:.0f} % with the point's model left out, "
        f"{100 * c['gpu_left_out']:.0f} % with its GPU left out, {100 * c['in_sample']:.0f} % in-sample"
        for metric, c in shares.items()
    )
    lines = [
        "# Held-out check: published serving sweeps never fitted",
        "",
        "Generated by `python benchmarks/heldout_silicon.py --write` (see its docstring). Do not edit by hand.",
        "",
        f"Source: aiconfigurator-core {source.version} `systems/silicon_sample.csv`, aggregated rows with a "
        f"recorded concurrency, less the {len(calibration_ids)} calibration rows, each measurement once (a run the "
        f"file repeats from another source file counts once), without sweeps that write GPU totals as TP: "
        f"{len(rows)} rows; {len(unplaced)} "
        f"left out when read (a model, GPU or format the catalogs lack), {len(refused)} of the {len(records)} records "
        f"refused (reasons below), {len(compared)} predicted in {seconds:.0f} s.",
        "",
        "These errors, by engine and load, are the bands predictions print outside the serving calibration "
        f"(`{OUT_BANDS.relative_to(ROOT)}`). Inside their p90 band: {inside}.",
        "",
        *table(summarize_by(left_out, []), "points"),
        "",
        *table(summarize_by(left_out, ["gpu", "engine"]), "GPU, engine"),
        "",
        *table(summarize_by(left_out, ["model"]), "model"),
        "",
        *cliff_table(compared, cliff),
        "",
        "Refused (reason: records):",
        "",
        *[f"- {n}: {reason}" for reason, n in sorted(reasons.items(), key=lambda x: -x[1])[:15]],
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        write_outputs(text, bands_file(source.version, compared, shares, cliff))


def cliff_table(compared: Sequence[Comparison], cliff: dict[str, Any]) -> list[str]:
    """Markdown: the TTFT band of the points on a cliff, by cause (the pooled band where a cause has too few), the
    signed median error, and the share inside the band's p90 built without the point's model, its GPU, or none."""
    lines = [
        "TTFT of the points whose simulation is on a cliff (TTFT mostly queueing for KV blocks or batch slots); "
        "`simulate` prints this band for a run on such a cliff:",
        "",
        "| cliff | points | band: median / p90 \\|error\\| | signed median | inside p90 band (model / GPU left out, "
        "in-sample) |",
        "|---|---|---|---|---|",
    ]
    points = [c for c in compared if BAND_METRICS.get(c.record.kind) == "ttft" and c.cliff]
    for cause in (*CLIFF_CAUSES, "all"):
        errors = [c.error for c in points if cause in ("all", c.cliff)]
        a = np.abs(errors)
        pooled = {"typical": np.median(a), "p90": np.percentile(a, 90)} if errors else None
        band = cliff["bands"].get(cause, pooled if cause == "all" else None)
        spread = f"{100 * band['typical']:.1f} % / {100 * band['p90']:.1f} %" if band else "-"
        spread += " (pooled)" if band and "pooled" in band else ""
        cover = cliff["coverage"].get(cause)
        keys = ("model_left_out", "gpu_left_out", "in_sample")
        shares = " / ".join(f"{100 * cover[k]:.0f} %" for k in keys) if cover else "-"
        signed = f"{100 * np.median(errors):+.1f} %" if errors else "-"
        lines.append(f"| {cause} | {len(errors)} | {spread} | {signed} | {shares} |")
    return lines


def bands_file(
    version: str, compared: Sequence[Comparison], shares: dict[str, dict[str, float]], cliff: dict[str, Any]
) -> dict[str, Any]:
    """The bands file's content: the bands by engine x load, their coverage, and the cliff bands."""
    return {
        "generated_by": "python benchmarks/heldout_silicon.py --write",
        "source": f"aiconfigurator-core {version} systems/silicon_sample.csv: {len(compared) // 2} "
        "aggregated closed-loop points outside the calibration file (other GPUs, models, engine "
        "releases); nothing is fitted to them but the MTP acceptance of the runs that drafted "
        "(benchmarks/mtp_acceptance.py) and vLLM 0.14's per-token all-reduce time (benchmarks/allreduce_token_fit.py)",
        "method": "median (typical) and p90 of |error| of infercast's predictions of those points, by engine x "
        "load and every coarser level; used for a GPU or a model the serving calibration never measured",
        "coverage": {metric: {k: round(v, 3) for k, v in c.items()} for metric, c in shares.items()},
        "bands": band_rows(compared),
        "cliff": {
            "method": "median (typical) and p90 of |error| of mean TTFT over the same points whose simulation is "
            f"on a cliff (TTFT mostly queueing), by cause; a cause with fewer than {MIN_CLIFF_POINTS} points takes "
            "the pooled cliff points ('pooled' says so); the TTFT band of any run on a cliff of that cause",
            **cliff,
        },
    }


def write_outputs(text: str, bands: dict[str, Any]) -> None:
    """Save the tables and the bands, each file replaced whole or left as it was (``files.atomic_write``)."""
    head = "# Error bands outside the serving calibration; written by benchmarks/heldout_silicon.py --write. "
    head += "Do not edit.\n"
    body = head + yaml.safe_dump(bands, sort_keys=False)
    atomic_write(OUT_MD, "output", lambda tmp: tmp.write_text(text))
    atomic_write(OUT_BANDS, "output", lambda tmp: tmp.write_text(body))


if __name__ == "__main__":
    main()
