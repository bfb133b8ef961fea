"""Errors on the whole public silicon set by group: GPU, model, engine release, load (issue 36, part 2).

Usage:  python benchmarks/silicon_groups.py [--workers 2] [--write] [--csv PATH]

Predicts every held-out row of aiconfigurator-core's ``systems/silicon_sample.csv`` as
``benchmarks/heldout_silicon.py`` does (same rows, same reading) and reports, per group, median, mean (MAPE) and
p90 |error| of mean TTFT and TPOT, the signed median, the points over-predicted more than 3x, and the error of
closed-loop throughput at each sweep's highest concurrency (clients x output tokens / (TTFT + (output - 1) x TPOT),
measured and predicted alike). Fitted on these rows, each reported left out by group by its own script: the MTP
acceptances (``benchmarks/mtp_acceptance.py``) and vLLM 0.14's per-token all-reduce time
(``benchmarks/allreduce_token_fit.py``); the other groups' figures are their leave-that-group-out errors (GPU, model or
engine release left out). ``--write`` saves
``benchmarks/silicon_groups.md``; ``--csv`` writes every point (for diagnosis: with its layout, cliff warning, the
launch script it was read with and its row id). About 1.5 minutes on two cores.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from heldout_silicon import CALIBRATION, held_out_rows  # noqa: E402

from infercast.calibrate.validation import BAND_METRICS, Comparison, compare_each  # noqa: E402
from infercast.cost.profile import silicon_fit  # noqa: E402
from infercast.records.kernel_tables import locate  # noqa: E402
from infercast.records.record import Record  # noqa: E402
from infercast.records.silicon_rows import convert_rows  # noqa: E402

OUT_MD = ROOT / "benchmarks" / "silicon_groups.md"
ACCURACY_MD = ROOT / "benchmarks" / "accuracy.md"
SECTION_START, SECTION_END = "<!-- silicon-groups -->", "<!-- /silicon-groups -->"
GATE_FILE = ROOT / "benchmarks" / "silicon_gate.json"
GATE_SUBSET = {"max_clients": 16, "max_output_len": 1024}
"""The CI gate's points: light loads, short outputs (about a third of the set, a minute to simulate)."""
GROUPS: dict[str, Callable[[Comparison], str]] = {
    "GPU": lambda c: c.record.gpu,
    "model": lambda c: c.record.model,
    "engine release": lambda c: c.record.engine,
    "clients": lambda c: _load(c.record.concurrency or c.record.batch),
}


def _load(clients: int) -> str:
    return "<= 16" if clients <= 16 else "17-64" if clients <= 64 else "> 64"


def _metric(c: Comparison) -> str:
    return c.record.kind.removeprefix("serving_")


def throughput_errors(compared: Sequence[Comparison]) -> list[tuple[Comparison, float]]:
    """(TTFT point, signed error of throughput) at each sweep's highest concurrency: a sweep is one GPU, engine,
    model, precision, TP and prompt/output length; throughput from mean TTFT and TPOT by Little's law."""
    pairs: dict[tuple, dict[str, Comparison]] = {}
    for c in compared:
        r = c.record
        key = (r.gpu, r.engine, r.model, r.precision, r.tp, r.input_len, r.output_len, r.concurrency or r.batch)
        pairs.setdefault(key, {})[_metric(c)] = c
    top: dict[tuple, tuple] = {}
    for key, both in pairs.items():
        if {"ttft", "tpot"} <= set(both) and (key[:-1] not in top or key[-1] > top[key[:-1]][-1]):
            top[key[:-1]] = key
    out = []
    for key in top.values():
        ttft, tpot, osl = pairs[key]["ttft"], pairs[key]["tpot"], key[6]
        measured = osl / (ttft.measured + (osl - 1) * tpot.measured)
        predicted = osl / (ttft.predicted + (osl - 1) * tpot.predicted)
        out.append((ttft, predicted / measured - 1.0))
    return out


def launch_of(rec: Record) -> str:
    """The launch script (``path @ commit``) a dated sweep row was read with, from its notes; else its engine release
    as the row gives it (e.g. ``sglang 0.5.6.post2``): what to group points by when diagnosing one script's runs."""
    found = re.search(r"launch: benchmarks/(\S+ @ [0-9a-f]+)", rec.notes)
    return found[1] if found else rec.notes.split(";", 1)[0].split(" (", 1)[0]


def _row(label: str, metric: str, errors: Sequence[float]) -> str:
    e = np.asarray(errors)
    a = np.abs(e)
    return (
        f"| {label} | {metric} | {e.size} | {100 * np.median(a):.1f} % | {100 * a.mean():.1f} % | "
        f"{100 * np.percentile(a, 90):.1f} % | {100 * np.median(e):+.1f} % | {int((e > 2.0).sum())} |"
    )


def tables(compared: Sequence[Comparison]) -> list[str]:
    """Markdown: all points, then one table per grouping."""
    thr = throughput_errors(compared)
    head = [
        "| {} | metric | points | median | mean (MAPE) | p90 | signed median | over 3x |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines = [head[0].format("group"), head[1]]
    for metric in ("ttft", "tpot"):
        lines.append(_row("all", metric, [c.error for c in compared if _metric(c) == metric]))
    lines.append(_row("all", "throughput at top load", [e for _, e in thr]))
    for name, key in GROUPS.items():
        lines += ["", head[0].format(name), head[1]]
        for value in sorted({key(c) for c in compared}):
            for metric in ("ttft", "tpot"):
                errors = [c.error for c in compared if _metric(c) == metric and key(c) == value]
                if errors:
                    lines.append(_row(value, metric, errors))
            errors = [e for c, e in thr if key(c) == value]
            if errors:
                lines.append(_row(value, "throughput at top load", errors))
    return lines


def held_out_records() -> tuple[list[Record], str]:
    """The wheel's held-out rows as records (the calibration rows left out), and the wheel's version."""
    source = locate()
    sample = source.data.parent / "silicon_sample.csv"
    with CALIBRATION.open(newline="") as f:
        calibration_ids = {row["id"] for row in csv.DictReader(f)}
    rows = held_out_rows(sample, calibration_ids)
    records, _, _ = convert_rows([(f"{sample.name} id {row['id']}", row) for row in rows])
    return records, source.version


def silicon_fit_report() -> list[str]:
    """The per-release fit's report (``cost/profiles/silicon_fit.yaml``): its errors in sample and left out by
    model and by GPU, on its own rows and within the whole set, as Markdown lines."""
    lines = silicon_fit().get("report") or []
    return ["Fitted per release on these rows (`cost/profiles/silicon_fit.yaml`):", "", *(f"    {x}" for x in lines)]


def in_gate(rec: Record, subset: dict[str, int]) -> bool:
    """Whether a record is in the CI gate's subset: the light loads with short outputs, cheap to simulate."""
    return (rec.concurrency or rec.batch) <= subset["max_clients"] and rec.output_len <= subset["max_output_len"]


def gate_figures(compared: Sequence[Comparison]) -> dict[str, dict[str, float]]:
    """Median and mean |error| per metric (ttft, tpot) over the points given."""
    out: dict[str, dict[str, float]] = {}
    for metric in ("ttft", "tpot"):
        a = np.abs([c.error for c in compared if _metric(c) == metric])
        out[metric] = {
            "points": int(a.size),
            "median": round(float(np.median(a)), 4),
            "mean": round(float(a.mean()), 4),
        }
    return out


def write_gate(records: Sequence[Record], compared: Sequence[Comparison]) -> None:
    """``benchmarks/silicon_gate.json``: the gate subset's figures (tests/test_silicon_gate.py recomputes them)."""
    kept = [c for c in compared if in_gate(c.record, GATE_SUBSET)]
    gate = {
        "subset": GATE_SUBSET,
        "records": sum(in_gate(r, GATE_SUBSET) for r in records),
        "points": len(kept),
        "metrics": gate_figures(kept),
    }
    GATE_FILE.write_text(json.dumps(gate, indent=1) + "\n")


def write_accuracy_section(text: list[str]) -> None:
    """Put these tables into ``benchmarks/accuracy.md`` between its silicon markers (kept by accuracy.py)."""
    block = "\n".join([SECTION_START, "", "## The whole public silicon set by group", "", *text[4:], "", SECTION_END])
    body = ACCURACY_MD.read_text()
    if SECTION_START in body:
        body = body[: body.index(SECTION_START)] + block + body[body.index(SECTION_END) + len(SECTION_END) :]
    else:
        body = body.rstrip("\n") + "\n\n" + block + "\n"
    ACCURACY_MD.write_text(body)


def burst_lines(compared: Sequence[Comparison], over: Sequence[Comparison]) -> list[str]:
    """How many TTFT points' simulations note that their mean TTFT is mostly the closed loop's opening burst
    (``sim/burst.py``), with the median |error| with the note and without it (the note says what the figure hangs
    on, not that it is worse); and for the points ``over`` 3x that carry it, how the TTFT the note gives for the
    requests after the burst compares with the measured mean."""
    ttft = [c for c in compared if BAND_METRICS.get(c.record.kind) == "ttft"]
    noted = [abs(c.error) for c in ttft if c.burst is not None]
    rest = [abs(c.error) for c in ttft if c.burst is None]
    if not noted or not rest:
        return []
    text = (
        f"The opening-burst note (`sim/burst.py`: at least half of the summed TTFT is the first request of each "
        f"client, all sent at once, so the mean hangs on how many requests follow) is on {len(noted)} of the "
        f"{len(ttft)} TTFT points. Their median |error| is {100 * float(np.median(noted)):.1f} %, against "
        f"{100 * float(np.median(rest)):.1f} % for the others."
    )
    ratios = [c.burst / c.measured for c in over if c.burst is not None]
    if ratios:
        text += (
            f" On the {len(ratios)} points over 3x that carry it, the TTFT it gives for the requests after the burst "
            f"is {min(ratios):.2f}-{max(ratios):.2f}x the measured mean."
        )
    return [text]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--write", action="store_true", help=f"save {OUT_MD.relative_to(ROOT)}")
    parser.add_argument("--csv", type=Path, help="write every point here")
    args = parser.parse_args()
    if not CALIBRATION.is_file():
        parser.error(f"needs {CALIBRATION} (the calibration rows, left out here) beside the checkout")
    records, version = held_out_records()
    compared, refused = compare_each(records, None, workers=args.workers)
    over = [c for c in compared if c.error > 2.0]
    warned = sum(c.cliff is not None for c in over)  # the cause the point's own simulation carried
    noted = [c for c in over if c.cliff is None and c.burst is not None]
    text = [
        "# The public silicon set by group",
        "",
        "Generated by `python benchmarks/silicon_groups.py --write` (see its docstring). Do not edit by hand.",
        "",
        f"aiconfigurator-core {version} `systems/silicon_sample.csv`: {len(compared)} records predicted, "
        f"{len(refused)} refused (see `benchmarks/heldout_silicon.md`). Two things are fitted on these rows, each "
        "reported left out by group: the MTP acceptance of each model whose runs drafted with MTP, DeepSeek-R1 "
        "(TensorRT-LLM, SGLang) and Qwen3.5 (SGLang) (`benchmarks/mtp_acceptance.py`, left out by GPU or shape), and "
        "vLLM 0.14's time per token per all-reduce call (`allreduce_token_s`, `benchmarks/allreduce_token_fit.py`; "
        "its report below). Nothing else is, so the other groups' errors are their leave-that-group-out errors (GPU, "
        "model, engine release, load); the reading of the rows (clients per engine, the sweeps' length range) and "
        "the TensorRT-LLM 1.1+ front-end were chosen on them (`records/silicon_rows.py`, "
        "`cost/profiles/defaults.yaml`); the sweeps' engine settings are their launch scripts' "
        "(`records/data/sweep_launches.yaml`). Signed: + over-predicted.",
        "",
        *silicon_fit_report(),
        "",
        *tables(compared),
        "",
        f"Of the {len(over)} TTFT and TPOT points over-predicted more than 3x, {warned} carry a cliff warning "
        "(the prediction says its TTFT is mostly queueing for KV blocks or batch slots, and what removes it); "
        f"{len(noted)} TTFT points carry the opening-burst note instead, and {len(over) - warned - len(noted)} "
        "neither.",
        "",
        *burst_lines(compared, noted),
    ]
    print("\n".join(text))
    if args.write:
        OUT_MD.write_text("\n".join(text) + "\n")
        write_gate(records, compared)
        write_accuracy_section(text)
    if args.csv:
        with args.csv.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(
                [
                    "metric",
                    "gpu",
                    "engine",
                    "model",
                    "precision",
                    "tp",
                    "clients",
                    "isl",
                    "osl",
                    "error",
                    "measured",
                    "predicted",
                    "ep",
                    "attention_dp",
                    "cliff",
                    "burst_rest_ttft_s",
                    "launch",
                    "id",
                ]
            )
            for c in compared:
                r = c.record
                clients = r.concurrency or r.batch
                w.writerow(
                    [
                        _metric(c),
                        r.gpu,
                        r.engine,
                        r.model,
                        r.precision,
                        r.tp,
                        clients,
                        r.input_len,
                        r.output_len,
                        c.error,
                        c.measured,
                        c.predicted,
                        r.ep,
                        r.attention_dp,
                        c.cliff or "",
                        "" if c.burst is None else c.burst,
                        launch_of(r),
                        r.source.rsplit(" id ", 1)[-1],
                    ]
                )


if __name__ == "__main__":
    main()
