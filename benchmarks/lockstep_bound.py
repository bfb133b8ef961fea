"""Which fixed-length closed-loop run sets could have kept their clients in lockstep waves (a diagnostic, no fit).

Usage:  python benchmarks/lockstep_bound.py

Reads aiconfigurator-core's ``systems/silicon_sample.csv``: the rows of aiconfigurator's own runs (fixed prompt and
output lengths; the dated sweeps, whose lengths vary, are left out). C clients that send equal prompts together
have a mean TTFT of at least (C + 1) / 2 prompts' linear-layer FLOPs at the datasheet peak
(:func:`infercast.records.silicon_rows.lockstep_ttft_bound`). Per run set (engine, release, model, GPU,
precision) it prints how many rows measured a mean TTFT below that bound, and the smallest and median ratio of
measured to bound. A set with a row below it did not keep its clients in lockstep; for an engine that prefills
prompts apart from the decodes (SGLang), whose simulated equal-length clients stay in waves, the records read such
a set with drifting clients (:func:`infercast.records.silicon_rows.drifting_runs`, marked ``prefill-first``).
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.errors import InfercastError  # noqa: E402
from infercast.records.kernel_tables import locate  # noqa: E402
from infercast.records.silicon_rows import (  # noqa: E402
    SWEEP_MARK,
    from_wheel_row,
    lockstep_ttft_bound,
    prefill_first_run_set,
)


def main() -> None:
    sample = locate().data.parent / "silicon_sample.csv"
    sets: dict[tuple[str, ...], list[float]] = defaultdict(list)
    prefill_first: set[tuple[str, ...]] = set()
    with open(sample, newline="") as f:
        for raw in csv.DictReader(f):
            row = from_wheel_row(raw)
            if row is None or row.get(SWEEP_MARK) == "1":
                continue
            try:
                bound = lockstep_ttft_bound(row)
            except (InfercastError, KeyError, ValueError):
                continue  # a model, GPU or format the catalogs cannot place
            key = tuple(row[c] for c in ("engine", "engine_version", "model", "gpu", "precision"))
            sets[key].append(float(row["ttft_ms_mean"]) / 1e3 / bound)
            if prefill_first_run_set(row) is not None:
                prefill_first.add(key)
    print("| engine | release | model | GPU | precision | rows | below the bound | min ratio | median ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key, ratios in sorted(sets.items()):
        ratios.sort()
        mark = " (prefill-first)" if key in prefill_first else ""
        below = sum(r < 1 for r in ratios)
        cells = [f"{key[0]}{mark}", *key[1:], str(len(ratios)), str(below)]
        print("| " + " | ".join(cells) + f" | {ratios[0]:.2f} | {ratios[len(ratios) // 2]:.2f} |")


if __name__ == "__main__":
    main()
