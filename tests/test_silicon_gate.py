"""CI gate on the whole public silicon set (issue 36): the light-load points of aiconfigurator-core's
``systems/silicon_sample.csv`` must not get worse than ``benchmarks/silicon_gate.json`` records.

``python benchmarks/silicon_groups.py --write`` writes the gate (median and mean |error| of mean TTFT and TPOT over
the points with at most 16 clients and 1024 output tokens, about a minute to simulate) with the tables by GPU,
model, engine release and load. Needs the ``aiconfigurator`` extra and ``../shared/reference`` beside the
checkout (the calibration rows are left out); skipped without them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from infercast.calibrate.validation import compare_each

ROOT = Path(__file__).resolve().parents[1]
GATE = json.loads((ROOT / "benchmarks" / "silicon_gate.json").read_text())
MEDIAN_TOLERANCE, MEAN_TOLERANCE = 0.02, 0.05
"""Two points of median |error|, five of mean (the mean moves more with a few points)."""


def _script():
    spec = importlib.util.spec_from_file_location("silicon_groups", ROOT / "benchmarks" / "silicon_groups.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_public_silicon_points_do_not_regress():
    pytest.importorskip("aiconfigurator_core")
    script = _script()
    if not script.CALIBRATION.is_file():
        pytest.skip(f"needs {script.CALIBRATION} beside the checkout")
    records, _ = script.held_out_records()
    kept = [r for r in records if script.in_gate(r, GATE["subset"])]
    assert len(kept) == GATE["records"], "the gate's subset changed: re-run benchmarks/silicon_groups.py --write"
    compared, _ = compare_each(kept, None, workers=1)
    assert len(compared) == GATE["points"], "points refused that the gate predicted"
    now = script.gate_figures(compared)
    worse = {
        f"{metric} {stat}": (now[metric][stat], committed[stat])
        for metric, committed in GATE["metrics"].items()
        for stat, tolerance in (("median", MEDIAN_TOLERANCE), ("mean", MEAN_TOLERANCE))
        if now[metric][stat] > committed[stat] + tolerance
    }
    assert not worse, f"|error| on the public silicon set regressed (now, committed): {worse}"
