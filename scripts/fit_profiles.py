"""Fit the cost profiles from all measurements in data/measurements/ (and the torch engine from data/harness/)
and install them.

Usage:  python scripts/fit_profiles.py [--out DIR]
Writes: src/infercast/cost/profiles/<gpu>.yaml (kernel parameters) for every GPU with measurements, and
        src/infercast/cost/profiles/engine_load.yaml (engine parameters shared by all GPUs); with --out, the same
        files into DIR instead (to compare with the installed ones without replacing them).
Three stages: one joint fit of every kernel-level and static-batch point; then, with those kernel profiles
installed, each serving engine's load parameters on its closed-loop points (infercast.calibrate.load_fit); then
the torch engine's overheads on infercast's own harness timed on real GPUs (data/harness/, outside the joint fit:
infercast.calibrate.harness_fit).
Rows measured on the CPU (gpu 'cpu') are left out: they test the harness, not a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "data" / "harness"
sys.path.insert(0, str(ROOT / "src"))

from infercast.calibrate.harness_fit import (  # noqa: E402
    fit_harness,
    held_out_errors,
    summarize_held_out,
    write_harness_fit,
)
from infercast.calibrate.load_fit import closed_loop_records as closed_loop  # noqa: E402
from infercast.calibrate.load_fit import fit_engines, is_load, write_engine_load  # noqa: E402
from infercast.calibrate.profile_fit import PROFILE_DIR, fit, write_engine_profile, write_gpu_profile  # noqa: E402
from infercast.cost.profile import load_profile, set_profile_override  # noqa: E402
from infercast.records.readers import load_records, measurement_files  # noqa: E402

WRITTEN_ELSEWHERE = ("defaults.yaml", "silicon_fit.yaml")
"""Profile files this script does not write: the priors, and the release parameters fitted on the public silicon
rows (benchmarks/allreduce_token_fit.py)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="write the profiles here instead of installing them")
    args = parser.parse_args()
    files = measurement_files([ROOT / "data" / "measurements"])
    everything = load_records(files)
    load = closed_loop(everything)
    records = [r for r in everything if not is_load(r)]
    source = ", ".join(str(f.relative_to(ROOT)) for f in files if "closed_loop" not in f.parts)
    load_source = ", ".join(str(f.relative_to(ROOT)) for f in files if "closed_loop" in f.parts)
    folder = args.out or PROFILE_DIR
    if args.out is None:
        for old in PROFILE_DIR.glob("*.yaml"):
            if old.name not in WRITTEN_ELSEWHERE:
                old.unlink()  # a fit from scratch: GPUs no longer measured fall back to priors
    result = fit(records, source=source, keep_measured_curves=True)
    for gpu in result.gpus:
        path = write_gpu_profile(result, gpu, folder / f"{gpu}.yaml", with_engines=False)
        data = result.gpu_profile(gpu, with_engines=False)["fit"]
        print(
            f"{gpu}: {data['points']} points, median |error| {data['median_abs_error_before']:.1%} -> "
            f"{data['median_abs_error_after']:.1%} -> {_show(path)}"
        )
    path = write_engine_profile(result, folder / "engine_load.yaml")
    print(
        f"engines {sorted(result.engine_values())} -> {_show(path)}; "
        f"{len(result.values)} parameters fitted on {len(result.records)} points"
        + (f" ({len(result.skipped)} CPU rows left out)" if result.skipped else "")
    )
    for line in result.underdetermined():
        print(f"warning: few points: {line} (the weak pull to the priors decides the rest)")
    if not result.converged:
        print(f"warning: the least-squares fit did not converge: {result.message}")
    if load:
        if args.out is not None:  # the load fit starts from the kernel profiles just written
            for gpu in result.gpus:
                set_profile_override(gpu, yaml.safe_load((folder / f"{gpu}.yaml").read_text()))
        load_profile.cache_clear()
        results = fit_engines(load, source=load_source)
        write_engine_load(results, load, path, load_source)
        for engine, res in results.items():
            values = ", ".join(f"{k.split(':')[1]} {v:.3g}" for k, v in res.values.items())
            print(f"{engine} under load: {len(res.records)} closed-loop points, {values}")
    harness_files = measurement_files([HARNESS]) if HARNESS.is_dir() else []
    if harness_files:  # stage 3: the torch engine on the harness's own GPU runs, kernel profiles as just written
        if args.out is not None:
            for gpu in result.gpus:
                set_profile_override(gpu, yaml.safe_load((folder / f"{gpu}.yaml").read_text()))
        load_profile.cache_clear()
        harness = load_records(harness_files)
        harness_source = ", ".join(str(f.relative_to(ROOT)) for f in harness_files)
        fitted = fit_harness(harness, source=harness_source)
        held_out = summarize_held_out(held_out_errors(harness))
        write_harness_fit(fitted, held_out, path, harness_source)
        values = ", ".join(f"{k.split(':')[1]} {v:.3g}" for k, v in fitted.values.items())
        print(
            f"torch engine on the harness: {len(fitted.records)} points, {values}; leaving one model out "
            f"{held_out['all']:.1%} median"
        )


def _show(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    main()
