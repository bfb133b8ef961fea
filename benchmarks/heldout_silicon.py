"""Held-out check: infercast against the published serving sweeps it was never fitted to.

Usage:  python benchmarks/heldout_silicon.py [--workers 2] [--write] [--limit N]

aiconfigurator-core 0.12.0 ships ``systems/silicon_sample.csv``: closed-loop benchmark points measured by NVIDIA on
H100, H200, B200, B300 and GB200 with TensorRT-LLM, vLLM and SGLang, for 15 models (dense, MoE, MLA, gpt-oss,
the 2026 families). The project calibrates only on the H100 rows that ``../shared/reference/closed_loop_h100.csv``
holds; every other aggregated row (one engine serving prefill and decode) with a recorded concurrency is held
out, and this script predicts each of them as ``infercast validate`` does (read as
``measure/closed_loop_rows.py`` reads the calibration rows: fixed lengths, 10 x C requests, the same engine
settings) and reports median and p90 |error| of mean TTFT and TPOT by GPU, engine and model, and how many points
fall inside the p90 error band that ``predict`` and ``simulate`` print for their regime. Nothing here is fitted:
the numbers say how far the tool carries beyond its calibration. Disaggregated rows are left out (the simulator's
disaggregated pools take TP only), as are the rows whose concurrency was not recorded.

``--write`` saves the tables to ``benchmarks/heldout_silicon.md``. Needs the ``aiconfigurator`` extra
(``pip install -e '.[aiconfigurator]'``). About 5-10 minutes on two cores.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.measure.aiconfigurator import locate  # noqa: E402
from infercast.measure.closed_loop_rows import from_wheel_row  # noqa: E402
from infercast.measure.records import load_records  # noqa: E402
from infercast.measure.validate import compare_each, summarize_by  # noqa: E402

CALIBRATION = ROOT.parent / "shared" / "reference" / "closed_loop_h100.csv"
OUT_MD = ROOT / "benchmarks" / "heldout_silicon.md"
COLUMNS = ("id", "engine", "engine_version", "model", "gpu", "precision", "tp", "ep", "attention_dp", "input_len",
           "output_len", "concurrency", "ttft_ms_mean", "tpot_ms_mean")  # fmt: skip


def held_out_rows(sample: Path, calibration_ids: set[str]) -> list[dict[str, str]]:
    """The wheel's aggregated rows with a recorded concurrency that the calibration file does not hold, in the
    closed-loop row format, as ``validate --data`` reads the wheel's file (``closed_loop_rows.from_wheel_row``)."""
    with sample.open(newline="") as f:
        rows = (from_wheel_row(row) for row in csv.DictReader(f) if row["id"] not in calibration_ids)
        return [row for row in rows if row is not None]


def table(stats: Sequence[dict[str, object]], title: str) -> list[str]:
    """Markdown rows of :func:`summarize_by`'s groups: points, median / p90 |error|, signed median, share inside
    the printed p90 band."""
    lines = [f"| {title} | metric | points | median / p90 \\|error\\| | signed median | inside p90 band |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for row in stats:
        group = " ".join(str(v) for v in row["group"].values()) if row["group"] else "all"
        metric = str(row["metric"]).split(" (")[0].removeprefix("closed-loop ")
        inside = f"{100 * row['within_p90_band']:.0f} % of {row['banded_points']}" if "banded_points" in row else "-"
        spread = f"{100 * row['median_ape']:.1f} % / {100 * row['p90_ape']:.1f} %"
        lines.append(f"| {group} | {metric} | {row['points']} | {spread} | {100 * row['median_signed']:+.1f} % | "
                     f"{inside} |")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="predict only every k-th row, k = rows / LIMIT")
    parser.add_argument("--write", action="store_true", help=f"save the tables to {OUT_MD.relative_to(ROOT)}")
    args = parser.parse_args()
    source = locate()
    sample = source.data.parent / "silicon_sample.csv"
    with CALIBRATION.open(newline="") as f:
        calibration_ids = {row["id"] for row in csv.DictReader(f)}
    rows = held_out_rows(sample, calibration_ids)
    if args.limit and len(rows) > args.limit:
        rows = rows[:: -(-len(rows) // args.limit)]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "heldout.csv"
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            records = load_records([path])
        skipped = len(rows) - len({r.origin for r in records})
        compared, refused = compare_each(records, None, workers=args.workers)
    seconds = time.perf_counter() - t0
    reasons: dict[str, int] = {}
    for u in refused:
        reason = u.reason.split(": ", 1)[-1]
        reasons[reason[:140]] = reasons.get(reason[:140], 0) + 1
    lines = [
        "# Held-out check: published serving sweeps never fitted",
        "",
        "Generated by `python benchmarks/heldout_silicon.py --write` (see its docstring). Do not edit by hand.",
        "",
        f"Source: aiconfigurator-core {source.version} `systems/silicon_sample.csv`, aggregated rows with a "
        f"recorded concurrency, less the {len(calibration_ids)} calibration rows: {len(rows)} rows; {skipped} left "
        f"out when read (a model, GPU or format the catalogs lack; {len(caught)} warnings), {len(refused)} of the "
        f"{len(records)} records refused (reasons below), {len(compared)} predicted in {seconds:.0f} s.",
        "",
        *table(summarize_by(compared, []), "points"),
        "",
        *table(summarize_by(compared, ["gpu", "engine"]), "GPU, engine"),
        "",
        *table(summarize_by(compared, ["model"]), "model"),
        "",
        "Refused (reason: records):",
        "",
        *[f"- {n}: {reason}" for reason, n in sorted(reasons.items(), key=lambda x: -x[1])[:15]],
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        OUT_MD.write_text(text)


if __name__ == "__main__":
    main()
