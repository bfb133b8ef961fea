"""Fit the cost profiles from all measurements in data/measurements/ (one joint fit) and install them.

Usage:  python scripts/fit_profiles.py
Writes: src/infercast/cost/profiles/<gpu>.yaml (kernel parameters) for every GPU with measurements, and
        src/infercast/cost/profiles/engines.yaml (engine parameters shared by all GPUs).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.measure.calibrate import fit, write_engine_profile, write_gpu_profile  # noqa: E402
from infercast.measure.records import read_records  # noqa: E402


def main() -> None:
    files = sorted((ROOT / "data" / "measurements").rglob("*.csv"))
    records = [r for f in files for r in read_records(f)]
    source = ", ".join(str(f.relative_to(ROOT)) for f in files)
    for old in (ROOT / "src" / "infercast" / "cost" / "profiles").glob("*.yaml"):
        if old.name != "defaults.yaml":
            old.unlink()  # a fit from scratch: priors only
    result = fit(records, source=source)
    for gpu in sorted({r.gpu for r in result.records}):
        path = write_gpu_profile(result, gpu, with_engines=False)
        data = result.gpu_profile(gpu, with_engines=False)["fit"]
        print(f"{gpu}: {data['points']} points, median |error| {data['median_abs_error_before']:.1%} -> "
              f"{data['median_abs_error_after']:.1%} -> {path.relative_to(ROOT)}")  # fmt: skip
    path = write_engine_profile(result)
    print(f"engines {sorted(result.engine_values())} -> {path.relative_to(ROOT)}; "
          f"{len(result.values)} parameters fitted on {len(result.records)} points "
          f"({len(result.skipped)} serving points left to the simulator)")  # fmt: skip


if __name__ == "__main__":
    main()
