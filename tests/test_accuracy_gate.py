"""CI gate: the committed accuracy must not regress by more than 2 points.

benchmarks/accuracy.py --write records, in benchmarks/accuracy_gate.json, the median |error| per metric of the
installed profiles on a named subset of data/measurements/: every published point, and the closed-loop
serving points cheap enough to simulate here (concurrency and output length capped as the file says). This
test recomputes those medians now and fails when one is more than 2 percentage points worse. (The full
leave-one-group-out table takes minutes and lives in benchmarks/accuracy.md.)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from infercast.calibrate.load_fit import is_load
from infercast.calibrate.profile_fit import CPU_LABEL
from infercast.calibrate.validation import compare
from infercast.records.readers import load_records

ROOT = Path(__file__).resolve().parents[1]
GATE = json.loads((ROOT / "benchmarks" / "accuracy_gate.json").read_text())
TOLERANCE = 0.02
"""Two percentage points of median |error|."""


def _metric(rec) -> str:
    if is_load(rec):
        return "closed-loop " + rec.kind.removeprefix("serving_")
    return compare([rec])[0].metric


def test_committed_accuracy_does_not_regress():
    cap = GATE["subset"]
    records = [
        r
        for r in load_records([ROOT / "data" / "measurements"])
        if r.gpu != CPU_LABEL
        and (not is_load(r) or (r.concurrency <= cap["max_concurrency"] and r.output_len <= cap["max_output_len"]))
    ]
    assert len(records) == GATE["points"], "the gate's subset changed: re-run python benchmarks/accuracy.py --write"
    errors: dict[str, list[float]] = {}
    for c in compare(records):
        errors.setdefault(_metric(c.record), []).append(abs(c.error))
    assert set(errors) == set(GATE["metrics"])
    worse = {}
    for metric, committed in GATE["metrics"].items():
        now = float(np.median(errors[metric]))
        if now > committed["median"] + TOLERANCE:
            worse[metric] = (round(now, 4), committed["median"])
    assert not worse, f"median |error| regressed by more than 2 points (now, committed): {worse}"
