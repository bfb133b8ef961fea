"""Fit the cost profiles from all measurements in data/measurements/ (one joint fit) and install them.

Usage:  python scripts/fit_profiles.py [--out DIR]
Writes: src/infercast/cost/profiles/<gpu>.yaml (kernel parameters) for every GPU with measurements, and
        src/infercast/cost/profiles/engines.yaml (engine parameters shared by all GPUs); with --out, the same
        files into DIR instead (to compare with the installed ones without replacing them).
Rows measured on the CPU (gpu 'cpu') are left out: they test the harness, not a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.measure.calibrate import PROFILE_DIR, fit, write_engine_profile, write_gpu_profile  # noqa: E402
from infercast.measure.records import load_records, measurement_files  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="write the profiles here instead of installing them")
    args = parser.parse_args()
    files = measurement_files([ROOT / "data" / "measurements"])
    records = load_records(files)
    source = ", ".join(str(f.relative_to(ROOT)) for f in files)
    folder = args.out or PROFILE_DIR
    if args.out is None:
        for old in PROFILE_DIR.glob("*.yaml"):
            if old.name != "defaults.yaml":
                old.unlink()  # a fit from scratch: GPUs no longer measured fall back to priors
    result = fit(records, source=source)
    for gpu in result.gpus:
        path = write_gpu_profile(result, gpu, folder / f"{gpu}.yaml", with_engines=False)
        data = result.gpu_profile(gpu, with_engines=False)["fit"]
        print(f"{gpu}: {data['points']} points, median |error| {data['median_abs_error_before']:.1%} -> "
              f"{data['median_abs_error_after']:.1%} -> {_show(path)}")  # fmt: skip
    path = write_engine_profile(result, folder / "engines.yaml")
    print(f"engines {sorted(result.engine_values())} -> {_show(path)}; "
          f"{len(result.values)} parameters fitted on {len(result.records)} points"
          + (f" ({len(result.skipped)} CPU rows left out)" if result.skipped else ""))  # fmt: skip
    for line in result.underdetermined():
        print(f"warning: few points: {line} (the weak pull to the priors decides the rest)")
    if not result.converged:
        print(f"warning: the least-squares fit did not converge: {result.message}")


def _show(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    main()
