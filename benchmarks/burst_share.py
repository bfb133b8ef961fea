"""Do the published closed-loop means count their opening burst? The public silicon set, read both ways.

Usage:  python benchmarks/burst_share.py [--workers 2]

A closed loop's clients all send their first request at once, so those prompts queue for prefill; the mean TTFT
over the run counts them (``vllm bench serve``) or leaves them out (a warm-up). The held-out rows are simulated
as ``benchmarks/silicon_groups.py`` simulates them (the burst counted), and each point's mean TTFT is compared
with the measured one, and so is the mean of the requests after the first C (the burst left out). By the burst's
share of the simulated mean (``sim/burst.py``), it prints the median predicted / measured both ways, then the same
per source directory of the rows (one harness, engine release and GPU). Nothing is fitted; about 1 minute on two
cores. The accuracy notes quote it ("The opening burst", thirteenth pass).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from silicon_groups import held_out_records  # noqa: E402

import infercast.sim.burst as burst  # noqa: E402
from infercast.calibrate.serving import serving_bench  # noqa: E402
from infercast.calibrate.validation import Comparison, compare_each  # noqa: E402
from infercast.records.kernel_tables import locate  # noqa: E402

BANDS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.0)
"""Edges of the burst-share bands (share of the simulated mean TTFT that the first C requests make)."""


def burst_share(c: Comparison) -> float:
    """The first C requests' share of the simulated mean TTFT: 1 - (N - C) x (mean after them) / (N x mean)."""
    bench = serving_bench(c.record)
    n, clients = bench.measured, bench.concurrency
    return 1.0 - (n - clients) * float(c.burst or 0.0) / (n * c.predicted)


def source_dirs() -> dict[str, str]:
    """Row id -> the directory of the wheel row's source file (one harness, engine release and GPU)."""
    with (locate().data.parent / "silicon_sample.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    out = {}
    for row in rows:
        found = re.search(r"source_file=([^;]+)", row["silicon_data_source"])
        path = found.group(1) if found else "(database dump)"
        out[row["id"]] = re.sub(r"^.*/data/", "", path.rsplit("/", 1)[0]) if found else path
    return out


def line(name: str, points: list[Comparison]) -> str:
    with_burst = np.array([c.predicted / c.measured for c in points])
    without = np.array([float(c.burst or 0.0) / c.measured for c in points])
    return (
        f"| {name} | {len(points)} | {np.median(with_burst):.2f} | {np.mean(np.abs(np.log(with_burst))):.2f} | "
        f"{np.median(without):.2f} | {np.mean(np.abs(np.log(without))):.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    burst.BURST_SHARE = -1.0  # every closed loop reports the mean after its burst (forked workers inherit it)
    records, _ = held_out_records()
    ttft = [r for r in records if r.kind == "serving_ttft" and not r.warmup]
    compared, _ = compare_each(ttft, None, workers=args.workers)
    if any(c.burst is None for c in compared):  # a worker started fresh (not forked) kept the module's threshold
        raise SystemExit("some points carry no mean after the burst: run with --workers 1")
    head = "| {} | points | with the burst: median ratio | mean abs log | without: median ratio | mean abs log |"
    print(head.format("burst share"), "|---|---|---|---|---|---|", sep="\n")
    shares = [burst_share(c) for c in compared]
    for lo, hi in itertools.pairwise(BANDS):
        chosen = [c for c, s in zip(compared, shares, strict=True) if lo < s <= hi or (lo == 0.0 and s <= hi)]
        if chosen:
            print(line(f"{lo:.1f}-{hi:.1f}", chosen))
    print("", head.format("source directory"), "|---|---|---|---|---|---|", sep="\n")
    dirs = source_dirs()
    groups: dict[str, list[Comparison]] = {}
    for c in compared:
        groups.setdefault(dirs.get(c.record.source.rsplit(" id ", 1)[-1], "?"), []).append(c)
    for name, points in sorted(groups.items()):
        print(line(name, points))


if __name__ == "__main__":
    main()
