"""Accuracy report: infercast's predictions against every measured point in data/measurements/.

Usage:  python benchmarks/accuracy.py [--markdown] [--points] [--write]

Columns of error per metric (median / p90 of |predicted / measured - 1|):
- priors:    architecture/engine priors only (no calibration),
- fitted:    the installed profiles (src/infercast/cost/profiles/, fitted on these same points),
- held-out:  leave-one-group-out cross-validation: every point predicted by profiles fitted without its
             group, for each grouping in turn: one engine, one tensor-parallel size, one model left out
             (the reported error of a point is the mean of its three held-out errors' magnitudes).
The held-out column is the honest estimate of error on configurations not calibrated on.

Two fits are cross-validated, as scripts/fit_profiles.py and scripts/fit_engines.py run them:
- kernel-level and static-batch records (data/measurements/published/): infercast.calibrate.profile_fit.fit;
- closed-loop serving records (data/measurements/closed_loop/): the per-engine load fit
  (infercast.calibrate.load_fit) on top of the installed GPU kernel profile. Those kernel parameters come
  from kernel-level data, never from closed-loop points, so they are not refitted per fold. An engine left
  out has no data of its own: its load parameters fall back to their priors.

--write regenerates benchmarks/accuracy.md (the table the README quotes), benchmarks/accuracy.csv (every
point) and src/infercast/data/error_bands.yaml (error bands by regime, shown with every prediction), and
benchmarks/accuracy_gate.json (the subset the CI test tests/test_accuracy_gate.py recomputes).
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.analysis.error_bands import BANDS_FILE, load_level, tp_group  # noqa: E402
from infercast.calibrate.load_fit import LOAD_PARAMS, fit_engines, fitted_values, is_load  # noqa: E402
from infercast.calibrate.predict import profile_for  # noqa: E402
from infercast.calibrate.profile_fit import CPU_LABEL, PRIOR_WEIGHT, build_profiles, fit  # noqa: E402
from infercast.calibrate.serving import highest_served_rates, served_concurrency  # noqa: E402
from infercast.calibrate.validation import Comparison, compare  # noqa: E402
from infercast.records.readers import load_records  # noqa: E402
from infercast.records.record import Record  # noqa: E402

GROUPINGS: dict[str, Callable[[Record], str]] = {
    "engine": lambda r: r.engine.split("-")[0],  # vllm-0.6 and vllm are one engine family
    "tp": lambda r: str(r.tp),
    "model": lambda r: r.model,
}
"""Leave-one-group-out: each point is predicted once per grouping, by a fit without its group."""
GATE = {"max_concurrency": 16, "max_output_len": 256}
"""The CI gate's subset of closed-loop points (cheap to simulate): concurrency <= 16, output <= 256 tokens."""
OUT_MD = ROOT / "benchmarks" / "accuracy.md"
OUT_CSV = ROOT / "benchmarks" / "accuracy.csv"
OUT_GATE = ROOT / "benchmarks" / "accuracy_gate.json"
OUT_BANDS = ROOT / "src" / "infercast" / "data" / BANDS_FILE


def pairs(records: Sequence[Record]) -> list[tuple[str, str]]:
    return sorted({(r.gpu, r.engine) for r in records})


def metric_name(r: Record) -> str:
    """Short metric names of the table: the closed-loop kinds become 'ttft' / 'tpot' (the issue's targets)."""
    if is_load(r):
        return "closed-loop " + r.kind.removeprefix("serving_")
    return Comparison(r, 1.0, 1.0).metric


def _fold(args: tuple[str, str]) -> tuple[str, str, list[int], list[float], float]:
    """One fold (grouping, group left out), run in a worker process: indices of its test points and their
    held-out predictions (both fits; see the module docstring)."""
    name, group = args
    records = RECORDS
    key = GROUPINGS[name]
    t0 = time.perf_counter()
    test_idx = [i for i, r in enumerate(records) if key(r) == group]
    train = [r for r in records if key(r) != group]
    test = [records[i] for i in test_idx]
    preds: dict[int, float] = {}
    fast_test = [r for r in test if not is_load(r)]
    load_test = [r for r in test if is_load(r)]
    if fast_test:
        fast_train = [r for r in train if not is_load(r)]
        values = fit(fast_train, prior_weight=PRIOR_WEIGHT, keep_measured_curves=True).values if fast_train else {}
        profiles = build_profiles(pairs(records), values, "cross-validation")
        for r, c in zip(fast_test, compare(fast_test, profiles), strict=True):
            preds[id(r)] = c.predicted
    if load_test:
        values = {}
        for engine in sorted({r.engine for r in load_test}):
            mine = [r for r in train if is_load(r) and r.engine == engine]
            if mine:  # an engine left out keeps its prior load parameters
                values |= fitted_values(fit_engines(mine))
        profiles = build_profiles(pairs(load_test), values, "cross-validation", base="kernels")
        for r, c in zip(load_test, compare(load_test, profiles), strict=True):
            preds[id(r)] = c.predicted
    return name, group, test_idx, [preds[id(records[i])] for i in test_idx], time.perf_counter() - t0


RECORDS: list[Record] = []
"""The records of this run (module global: worker processes inherit it when forked)."""


def held_out(records: list[Record], log: Callable[[str], None], workers: int) -> dict[str, np.ndarray]:
    """Signed held-out error of every record, per grouping (arrays aligned with ``records``)."""
    RECORDS[:] = records
    folds = [(name, group) for name, key in GROUPINGS.items() for group in sorted({key(r) for r in records})]
    errors = {name: np.full(len(records), np.nan) for name in GROUPINGS}
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            results = list(pool.imap_unordered(_fold, folds))
    else:
        results = [_fold(f) for f in folds]
    for name, group, idx, preds, seconds in sorted(results, key=lambda x: (x[0], x[1])):
        for i, p in zip(idx, preds, strict=True):
            errors[name][i] = p / records[i].value_si - 1
        log(f"  leave {name} {group} out: {len(idx)} points, {seconds:.0f} s")
    return errors


def summary(records: list[Record], err: np.ndarray) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(metric_name(r), []).append(i)
    for metric, idx in sorted(groups.items()):
        e = np.abs(err[idx])
        out[metric] = {
            "points": len(idx),
            "median": float(np.median(e)),
            "p90": float(np.percentile(e, 90)),
            "signed_median": float(np.median(err[idx])),
        }
    return out


def table(columns: dict[str, dict[str, dict[str, float]]], markdown: bool) -> str:
    metrics = list(next(iter(columns.values())))
    head = ["metric", "points"] + [f"{name} median / p90" for name in columns]
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    else:
        lines.append("  ".join(f"{h:>24s}" if i else f"{h:<34s}" for i, h in enumerate(head)))
    for metric in metrics:
        cells = [metric, str(next(iter(columns.values()))[metric]["points"])]
        for s in columns.values():
            cells.append(f"{100 * s[metric]['median']:.1f}% / {100 * s[metric]['p90']:.1f}%")
        if markdown:
            lines.append("| " + " | ".join(cells) + " |")
        else:
            lines.append("  ".join(f"{c:>24s}" if i else f"{c:<34s}" for i, c in enumerate(cells)))
    return "\n".join(lines)


def closed_loop_breakdown(records: list[Record], err_fit: np.ndarray, err_cv: np.ndarray, markdown: bool) -> str:
    """The closed-loop points by metric, engine, model and load level: where the error sits (fitted and held-out
    median / p90 of |error|, and the held-out signed median: + over-predicted, - under-predicted)."""
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(records):
        if is_load(r):
            metric = metric_name(r).removeprefix("closed-loop ")
            groups.setdefault((metric, r.engine, r.model, r.precision, load_level(r.in_flight)), []).append(i)
    head = [
        "metric",
        "engine",
        "model",
        "load",
        "points",
        "fitted median / p90",
        "held-out median / p90",
        "held-out signed median",
    ]
    if not groups:
        return "(no closed-loop points)"
    rows = []
    for (metric, engine, model, precision, level), idx in sorted(groups.items()):
        fit_abs, cv_abs = np.abs(err_fit[idx]), np.abs(err_cv[idx])
        rows.append(
            [
                metric,
                engine,
                f"{model} {precision}",
                level,
                str(len(idx)),
                f"{100 * np.median(fit_abs):.1f}% / {100 * np.percentile(fit_abs, 90):.1f}%",
                f"{100 * np.median(cv_abs):.1f}% / {100 * np.percentile(cv_abs, 90):.1f}%",
                f"{100 * np.median(err_cv[idx]):+.1f}%",
            ]
        )
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        widths = [max(len(h), *(len(row[j]) for row in rows)) for j, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def regime_rows(records: list[Record], err: np.ndarray, prior_err: np.ndarray) -> list[dict[str, object]]:
    """Error-band rows: per metric, for fitted GPUs by engine x load x tp (and every coarser level), and for
    prior-only GPUs from the priors-only kernel predictions (engine load parameters still fitted)."""
    rows = []
    load = [i for i, r in enumerate(records) if is_load(r)]
    for metric in ("ttft", "tpot"):
        idx = [i for i in load if records[i].kind.endswith(metric)]
        for gpu_kind, e in (("fitted", err), ("prior", prior_err)):
            dims = [
                ("engine", lambda r: r.engine),
                ("load", lambda r: load_level(r.in_flight)),
                ("tp", lambda r: tp_group(r.tp)),
            ]
            for depth in range(len(dims) + 1):
                keys: dict[tuple, list[int]] = {}
                for i in idx:
                    keys.setdefault(tuple(f(records[i]) for _, f in dims[:depth]), []).append(i)
                for key, members in sorted(keys.items()):
                    a = np.abs(e[members])
                    row: dict[str, object] = {"metric": metric, "gpu": gpu_kind}
                    row.update({d: k for (d, _), k in zip(dims[:depth], key, strict=True)})
                    row.update(
                        {
                            "typical": round(float(np.median(a)), 4),
                            "p90": round(float(np.percentile(a, 90)), 4),
                            "points": len(members),
                        }
                    )
                    rows.append(row)
    return rows


def gate_subset(records: list[Record]) -> list[Record]:
    """What tests/test_accuracy_gate.py recomputes: every published record and the cheap closed-loop ones."""
    return [
        r
        for r in records
        if not is_load(r) or (r.concurrency <= GATE["max_concurrency"] and r.output_len <= GATE["max_output_len"])
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "measurements")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--points", action="store_true", help="also print every point")
    parser.add_argument("--write", action="store_true", help="regenerate the committed table, bands and gate")
    parser.add_argument("--workers", type=int, default=4, help="processes for the cross-validation folds")
    args = parser.parse_args()
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    records = [r for r in load_records([args.data]) if r.gpu != CPU_LABEL]  # CPU rows only test the harness
    t0 = time.perf_counter()
    priors = compare(records, build_profiles(pairs(records), {}, "prior"))
    fitted = compare(records)
    log(f"priors and fitted: {time.perf_counter() - t0:.0f} s")
    measured = np.array([r.value_si for r in records])
    err_prior = np.array([c.predicted for c in priors]) / measured - 1
    err_fit = np.array([c.predicted for c in fitted]) / measured - 1
    per_group = held_out(records, log, args.workers)
    # a point's held-out error: the mean magnitude over the groupings, signed by their mean
    stack = np.vstack(list(per_group.values()))
    err_cv = np.sign(stack.mean(axis=0)) * np.abs(stack).mean(axis=0)
    # prior-only GPU: kernel priors, engine load parameters as installed (they are shared by all GPUs)
    load = [r for r in records if is_load(r)]
    engine_values = {
        f"{eng}:{k}": getattr(profile_for(r, None), k) for r in load for eng in [r.engine] for k in LOAD_PARAMS
    }
    prior_load = compare(load, build_profiles(pairs(load), engine_values, "prior kernels"))
    err_prior_load = err_cv.copy()
    load_idx = [i for i, r in enumerate(records) if is_load(r)]
    for i, c in zip(load_idx, prior_load, strict=True):
        err_prior_load[i] = c.predicted / measured[i] - 1
    columns = {"priors": summary(records, err_prior), "fitted": summary(records, err_fit)}
    columns |= {f"held-out ({name})": summary(records, e) for name, e in per_group.items()}
    columns["held-out (mean)"] = summary(records, err_cv)
    text = table(columns, args.markdown)
    print(f"{len(records)} measured points from {args.data.relative_to(ROOT)}\n")
    print(text)
    breakdown = closed_loop_breakdown(records, err_fit, err_cv, args.markdown)
    print("\nClosed-loop points by engine, model and load (held-out: the mean over the groupings, as above)\n")
    print(breakdown)
    if args.points:
        for i, r in enumerate(records):
            print(
                f"{metric_name(r):28s} {r.model:12s} {r.engine:8s} tp{r.tp} c{r.in_flight:<4d} in {r.input_len:<5d} "
                f"out {r.output_len:<5d} measured {r.value_si:10.4g}  prior {100 * err_prior[i]:+6.1f}%  "
                f"fitted {100 * err_fit[i]:+6.1f}%  held-out {100 * err_cv[i]:+6.1f}%"
            )
    if args.write:
        markdown = text if args.markdown else table(columns, True)
        by_engine = breakdown if args.markdown else closed_loop_breakdown(records, err_fit, err_cv, True)
        markdown += (
            "\n\n## Closed-loop points by engine, model and load\n\nLoad levels as in the error bands "
            "(light <= 16 clients, medium <= 64, heavy above); held-out is the mean over the groupings, "
            "signed: + over-predicted, - under-predicted.\n\n" + by_engine
        )
        write_outputs(records, markdown, err_prior, err_fit, per_group, err_cv, err_prior_load)


def write_outputs(records, markdown, err_prior, err_fit, per_group, err_cv, err_prior_load) -> None:
    head = (
        "Generated by `python benchmarks/accuracy.py --write` (leave-one-group-out cross-validation; "
        "see its docstring). Do not edit by hand.\n\n"
    )
    kept = ""  # benchmarks/silicon_groups.py --write keeps its section here
    old = OUT_MD.read_text() if OUT_MD.is_file() else ""
    if "<!-- silicon-groups -->" in old:
        kept = "\n" + old[old.index("<!-- silicon-groups -->") :].rstrip("\n") + "\n"
    OUT_MD.write_text("# Accuracy\n\n" + head + markdown + "\n" + kept)
    with OUT_CSV.open("w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(
            [
                "metric",
                "kind",
                "model",
                "gpu",
                "engine",
                "precision",
                "tp",
                "batch",
                "input_len",
                "output_len",
                "measured",
                "error_priors",
                "error_fitted",
                *[f"error_heldout_{g}" for g in per_group],
                "error_heldout_mean",
                "source",
            ]
        )
        for i, r in enumerate(records):
            w.writerow(
                [
                    metric_name(r),
                    r.kind,
                    r.model,
                    r.gpu,
                    r.engine,
                    r.precision,
                    r.tp,
                    r.in_flight,
                    r.input_len,
                    r.output_len,
                    f"{r.value_si:.6g}",
                    f"{err_prior[i]:.4f}",
                    f"{err_fit[i]:.4f}",
                    *[f"{e[i]:.4f}" for e in per_group.values()],
                    f"{err_cv[i]:.4f}",
                    r.source,
                ]
            )
    load = [r for r in records if is_load(r)]
    bands = {
        "generated_by": "python benchmarks/accuracy.py --write",
        "method": "median (typical) and p90 of |error| of leave-one-group-out predictions (engine, tp, model "
        "left out in turn) of closed-loop serving points; 'prior' rows: the same points predicted with kernel "
        "priors (a GPU without a fitted profile)",
        "calibrated": {
            "gpus": sorted({r.gpu for r in load}),
            "engines": sorted({r.engine for r in load}),
            "tp": sorted({r.tp for r in load}),
            "models": sorted({r.model for r in load}),
            "rates": highest_served_rates(load),
            "concurrency": served_concurrency(load),
        },
        "bands": regime_rows(records, err_cv, err_prior_load),
    }
    OUT_BANDS.write_text(
        "# Error bands by regime; written by benchmarks/accuracy.py --write. Do not edit.\n"
        + yaml.safe_dump(bands, sort_keys=False)
    )
    subset = gate_subset(records)
    chosen = {id(r) for r in subset}
    idx = [i for i, r in enumerate(records) if id(r) in chosen]
    gate = {"subset": GATE, "points": len(idx), "metrics": {}}
    for metric, s in summary([records[i] for i in idx], err_fit[idx]).items():
        gate["metrics"][metric] = {"points": s["points"], "median": round(s["median"], 4)}
    OUT_GATE.write_text(json.dumps(gate, indent=1) + "\n")
    print(
        f"\nwrote {OUT_MD.relative_to(ROOT)}, {OUT_CSV.relative_to(ROOT)}, {OUT_BANDS.relative_to(ROOT)}, "
        f"{OUT_GATE.relative_to(ROOT)}"
    )


if __name__ == "__main__":
    main()
