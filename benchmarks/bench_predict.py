"""Speed of the analytical model: vectorised sweep rate, single `predict` latency, and mlsysim 0.1.1.

Usage:  python benchmarks/bench_predict.py [--no-mlsysim]

Prints configurations/second of `infercast.sweep` over a 1,048,576-point grid (Llama-3.1-8B on H100,
256 batch sizes x 64 prompt lengths x 64 output lengths), the latency of one `infercast.predict`
call, and the same for mlsysim 0.1.1's `ServingModel.solve`, which the script installs into its own
virtual environment (.bench-venv/) so it never touches infercast's. Targets: >= 1,000,000 configurations/s
and < 200 us per predict.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import infercast  # noqa: E402

BATCHES = list(range(1, 257))
INPUTS = list(range(128, 8192 + 1, 128))
OUTPUTS = list(range(64, 4096 + 1, 64))
VENV = ROOT / ".bench-venv"

MLSYSIM_SCRIPT = r"""
import json, sys, time
import mlsysim
model, hw = mlsysim.Models.Llama3_8B, mlsysim.Hardware.Cloud.H100
solver = mlsysim.ServingModel()
configs = json.loads(sys.argv[1])
solver.solve(model=model, hardware=hw, seq_len=1024, batch_size=1, precision="fp16")
t = time.perf_counter()
for seq, batch in configs:
    solver.solve(model=model, hardware=hw, seq_len=seq, batch_size=batch, precision="fp16")
dt = time.perf_counter() - t
print(json.dumps({"calls": len(configs), "seconds": dt, "version": mlsysim.__version__}))
"""


def bench_sweep(repeats: int = 3) -> tuple[int, float]:
    best = float("inf")
    n = 0
    for _ in range(repeats):
        t = time.perf_counter()
        df = infercast.sweep(
            models="llama-3.1-8b",
            gpus="h100-sxm",
            precisions="bf16",
            batches=BATCHES,
            input_lens=INPUTS,
            output_lens=OUTPUTS,
        )
        best = min(best, time.perf_counter() - t)
        n = len(df)
    return n, best


def bench_predict() -> tuple[float, float]:
    call = lambda: infercast.predict("llama-3.1-8b", "h100-sxm", input_len=2048, output_len=256)  # noqa: E731
    call()
    runs = [t / 1000 for t in timeit.repeat(call, number=1000, repeat=7)]
    return min(runs), statistics.median(runs)


def bench_mlsysim(calls: int = 2000) -> dict | None:
    python = VENV / "bin" / "python"
    if not python.exists():
        print("creating .bench-venv with mlsysim==0.1.1 ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "mlsysim==0.1.1"], check=True)
    configs = [(INPUTS[i % len(INPUTS)], BATCHES[(7 * i) % len(BATCHES)]) for i in range(calls)]
    out = subprocess.run([str(python), "-c", MLSYSIM_SCRIPT, json.dumps(configs)], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"mlsysim failed: {out.stderr.strip().splitlines()[-1] if out.stderr else out.returncode}")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-mlsysim", action="store_true", help="skip the mlsysim comparison")
    args = parser.parse_args()
    n, seconds = bench_sweep()
    rate = n / seconds
    best, median = bench_predict()
    print(
        f"infercast.sweep   : {n:,} configurations in {seconds:.3f} s = {rate:,.0f} configurations/s "
        f"(target >= 1,000,000)"
    )
    print(f"infercast.predict : {median * 1e6:.0f} us median, {best * 1e6:.0f} us best per call (target < 200 us)")
    if args.no_mlsysim:
        return
    ml = bench_mlsysim()
    if ml:
        per_call = ml["seconds"] / ml["calls"]
        print(
            f"mlsysim {ml['version']} ServingModel.solve: {per_call * 1e6:.0f} us per configuration "
            f"= {1 / per_call:,.0f} configurations/s"
        )
        print(
            f"ratio: sweep is {rate * per_call:,.0f}x mlsysim's configurations/s; "
            f"predict is {per_call / median:,.1f}x faster per call (and returns the full two-phase report)"
        )
        print(
            "(mlsysim's solve is a closed-form formula over pint quantities; infercast sums per-operator "
            "rooflines over every decode step)"
        )


if __name__ == "__main__":
    main()
