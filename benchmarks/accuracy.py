"""Accuracy report: infercast's predictions against every measured point in data/measurements/.

Usage:  python benchmarks/accuracy.py [--folds 5] [--markdown] [--points]

Three columns of error per metric:
- priors:    architecture/engine priors only (no calibration),
- fitted:    the profiles installed in src/infercast/cost/profiles/ (fitted on these same points),
- held-out:  k-fold cross-validation: each point predicted by a profile fitted without it.
The held-out column is the honest estimate of error on new configurations.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.measure.calibrate import CPU_LABEL, PRIOR_WEIGHT, build_profiles, fit  # noqa: E402
from infercast.measure.records import Record, load_records  # noqa: E402
from infercast.measure.validate import Comparison, compare, summarize  # noqa: E402


def prior_profiles(records: list[Record]) -> dict:
    return build_profiles(sorted({(r.gpu, r.engine) for r in records}), {}, "prior")


def held_out(records: list[Record], folds: int) -> list[Comparison]:
    """k-fold cross-validation; folds interleave points so each fold mixes models, GPUs and lengths."""
    preds: list[Comparison | None] = [None] * len(records)
    for f in range(folds):
        test = set(range(f, len(records), folds))
        train = [r for i, r in enumerate(records) if i not in test]
        result = fit(train, prior_weight=PRIOR_WEIGHT)
        profiles = prior_profiles(records) | (
            (
                result.values
                and build_profiles(sorted({(r.gpu, r.engine) for r in records}), result.values, "cross-validation")
            )
            or {}
        )
        for i in test:
            preds[i] = compare([records[i]], profiles)[0]
    return [p for p in preds if p is not None]


def table(columns: dict[str, dict[str, dict[str, float]]], markdown: bool) -> str:
    metrics = list(next(iter(columns.values())))
    head = ["metric", "points"] + [f"{name} median / p90" for name in columns]
    lines = []
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
    else:
        lines.append("  ".join(f"{h:>26s}" if i else f"{h:<26s}" for i, h in enumerate(head)))
    for metric in metrics:
        cells = [metric, str(next(iter(columns.values()))[metric]["points"])]
        for summary in columns.values():
            s = summary.get(metric)
            cells.append(f"{100 * s['median_ape']:.1f}% / {100 * s['p90_ape']:.1f}%" if s else "-")
        if markdown:
            lines.append("| " + " | ".join(cells) + " |")
        else:
            lines.append("  ".join(f"{c:>26s}" if i else f"{c:<26s}" for i, c in enumerate(cells)))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "measurements")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--points", action="store_true", help="also print every point")
    args = parser.parse_args()
    records = [r for r in load_records([args.data]) if r.gpu != CPU_LABEL]  # CPU rows only test the harness
    priors = compare(records, prior_profiles(records))
    fitted = compare(records)
    cv = held_out(records, args.folds)
    print(f"{len(records)} measured points from {args.data.relative_to(ROOT)}\n")
    print(table({"priors": summarize(priors), "fitted": summarize(fitted), "held-out": summarize(cv)}, args.markdown))
    if args.points:
        print()
        by_key = {id(c.record): c for c in cv}
        for p, f in zip(priors, fitted, strict=True):
            r = p.record
            h = by_key.get(id(r))
            print(f"{p.metric:24s} {r.model:12s} {r.gpu:10s} {r.engine:11s} tp{r.tp} b{r.batch:<5d} "
                  f"in {r.input_len:<5d} out {r.output_len:<5d} {r.op:14s} measured {p.measured:10.4g}  "
                  f"prior {100 * p.error:+6.1f}%  fitted {100 * f.error:+6.1f}%  "
                  f"held-out {100 * h.error if h else np.nan:+6.1f}%")  # fmt: skip


if __name__ == "__main__":
    main()
