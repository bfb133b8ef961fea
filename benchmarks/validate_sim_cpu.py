"""The simulator against the real engine on this CPU: three loads x two schedulers, TTFT/TPOT/ITL/E2E.

Usage:  python benchmarks/validate_sim_cpu.py [--threads 1] [--duration 20] [--calibration FILE] [--out DIR]

1. Calibrate (unless --calibration): measured GEMM/copy peaks -> a ``cpu`` hardware spec; the engine serving
   calibration workloads (the validation's request distributions, other seeds; closed loops of 2 and 6
   clients and an offline burst, both schedulers, two interleaved rounds) -> its logged steps -> a fitted cost
   profile, scored on the round held out (harness/engine/cpu_steps.py).
2. For each scheduler, the simulator's offline throughput (all requests at once) sets the capacity; the
   loads are Poisson arrivals at 0.3x (light), 0.85x (near saturation) and 1.3x (overloaded) of it.
3. Each load runs on the engine in real time and in the simulator; the script prints measured vs simulated
   mean/p50/p90/p99, throughput, preemptions, prefix-hit rate and relative errors, writes them to
   ``DIR/validate_sim_cpu.json`` and ``.csv`` with the load average seen, and plots the CDFs.

Timings on a shared machine describe a slower, noisier machine: the load average before and after every
run is recorded next to its numbers. Whole run: about 4.5 minutes on an idle 2-core machine.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from infercast.harness.engine.cpu import load_calibration, save_calibration  # noqa: E402
from infercast.harness.engine.cpu_steps import calibrate  # noqa: E402
from infercast.harness.engine.sim_agreement import LATENCIES, Validation, build_model, plot_cdfs, validate_sim  # noqa: E402
from infercast.harness.engine.sim_twin import HarnessEngineConfig, simulate_engine  # noqa: E402
from infercast.sim.workload import WorkloadSpec  # noqa: E402
from infercast.specs.catalog import get_model  # noqa: E402

LOADS = {"light": 0.3, "near-saturation": 0.85, "overloaded": 1.3}
SCHEDULERS = ("prefill-first", "chunked")
TARGET = 0.10  # the bar: simulated TTFT and TPOT mean and p90 within 10 % of the engine's
INPUT_LEN, OUTPUT_LEN, PREFIX = "uniform:64,256", "uniform:16,64", (4, 64)
ENGINE_LIMITS = {"num_blocks": 128, "block_size": 16, "max_num_seqs": 16, "max_num_batched_tokens": 256}
"""The engine's KV blocks and per-step limits in every validation run (CPU and GPU): a pool small enough that the
overloaded runs preempt."""


def workload(rate: float | None, n: int, seed: int):
    load = {"rate": rate} if rate else {"offline": True}
    return WorkloadSpec(
        input_len=INPUT_LEN, output_len=OUTPUT_LEN, num_requests=n, prefix=PREFIX, seed=seed, **load
    ).build()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "benchmarks/configs/smollm2-135m.json"))
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: robust on a shared machine)")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds of arrivals per run")
    ap.add_argument("--calibration", help="a CPU calibration YAML to reuse (default: calibrate now)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    t0 = time.perf_counter()
    base = HarnessEngineConfig(get_model(args.model), num_layers=args.layers, precision=args.precision, **ENGINE_LIMITS)
    model = build_model(base)
    if args.calibration:
        hardware, profile, fit = load_calibration(args.calibration)
    else:
        hardware, profile, peaks, fit = calibrate(model, base, threads=args.threads, repeats=3)
        path = save_calibration(out / "cpu_calibration.yaml", peaks, profile, fit)
        held, grid = fit["held_out"], fit["grid_fit"]["on_engine_steps"]
        print(
            f"calibration: {path}  ({fit['points']} served steps, load average {fit['loadavg']}); on rounds held "
            f"out: per step mean |error| {held['mean_abs_rel_error']:.1%} (max {held['max_abs_rel_error']:.1%}), "
            f"summed time {held['total_rel_error']:+.1%} (decode {held['decode_total_rel_error']:+.1%}, prefill "
            f"{held['prefill_total_rel_error']:+.1%}, mixed {held['mixed_total_rel_error']:+.1%}); a fit to the "
            f"synthetic grid instead: grid error mean {fit['grid_fit']['mean_abs_rel_error']:.1%} (max "
            f"{fit['grid_fit']['max_abs_rel_error']:.1%}), on the served steps summed time "
            f"{grid['total_rel_error']:+.1%}, per step mean {grid['mean_abs_rel_error']:.1%}"
        )
    results: dict[str, Validation] = {}
    rows = []
    for scheduler, load, rate, n, v in load_runs(
        model, base, hardware, profile, duration=args.duration, seed=args.seed, threads=args.threads
    ):
        label = f"{scheduler}/{load}"
        results[label] = v
        for row in v.rows:
            i = v.info
            rows.append(
                {
                    "scheduler": scheduler,
                    "load": load,
                    "rate_req_s": rate,
                    "requests": n,
                    **row,
                    "speed_factor": i["speed_factor"],
                    "step_time_ratio_sum": i["step_time_ratio_sum"],
                    "loadavg_before": i["loadavg_before"][0],
                    "loadavg_after": i["loadavg_after"][0],
                }
            )
        _print(label, rate, v)
    worst = _verdict(results)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "validate_sim_cpu.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    meta = {
        "model": base.model_cut.id,
        "layers": args.layers,
        "precision": args.precision,
        "threads": args.threads,
        "calibration": fit.get("date"),
        "calibration_loadavg": fit.get("loadavg"),
        "worst_rel_error": worst,
        "wall_s": time.perf_counter() - t0,
        "loadavg_end": os.getloadavg(),
        "runs": {k: v.to_dict() for k, v in results.items()},
    }
    (out / "validate_sim_cpu.json").write_text(json.dumps(meta, indent=1, default=float))
    plot = plot_cdfs(results, out / "validate_sim_cpu_cdf.png")
    print(
        f"\nwrote {out / 'validate_sim_cpu.csv'}, {out / 'validate_sim_cpu.json'}, {plot}; "
        f"{time.perf_counter() - t0:.0f} s"
    )


def load_runs(model, base: HarnessEngineConfig, hardware, profile, *, duration: float, seed: int, threads: int):
    """Each scheduler at each load, in order: ``(scheduler, load, rate, requests, Validation)``. A load's rate is
    its fraction (:data:`LOADS`) of the simulator's offline capacity for that scheduler; it runs for
    ``duration`` seconds of arrivals (at least 16 requests)."""
    for scheduler in SCHEDULERS:
        config = HarnessEngineConfig(**{**base.__dict__, "scheduler": scheduler})
        capacity = simulate_engine(config, hardware, profile, workload(None, 200, seed)).summary[
            "request_throughput_req_s"
        ]
        for load, frac in LOADS.items():
            rate = frac * capacity
            n = max(16, round(rate * duration))
            yield (
                scheduler,
                load,
                rate,
                n,
                validate_sim(model, config, hardware, profile, workload(rate, n, seed), threads=threads),
            )


def _print(label: str, rate: float, v: Validation) -> None:
    i = v.info
    print(
        f"\n{label}: {i['requests']} requests at {rate:.2f} req/s, load average {i['loadavg_before'][0]:.2f} -> "
        f"{i['loadavg_after'][0]:.2f}; speed probe {i['speed_factor']:.2f}x the calibration; the run's steps "
        f"took {i['step_time_ratio_sum']:.2f}x the probe-scaled times in sum ({i['step_time_ratio_p50']:.2f}x "
        "median)"
    )
    print(f"  {'metric':28s} {'measured':>10s} {'simulated':>10s} {'error':>8s}")
    for row in v.rows:
        name = f"{row['metric']} {row['stat']}".strip()
        scale = 1e3 if row["metric"] in LATENCIES else 1.0
        print(f"  {name:28s} {row['measured'] * scale:10.3f} {row['simulated'] * scale:10.3f} {row['rel_error']:+8.1%}")


def _verdict(results: dict[str, Validation]) -> float:
    """Print the issue's check (TTFT and TPOT mean and p90 within 10 %) per run; returns the worst error.

    Second table: the simulator re-run with a profile fitted to the run's own step times, which takes the
    step-time model (and a machine slower than at calibration) out and leaves the scheduling dynamics."""
    worst = 0.0
    cols = [(m, s) for m in ("ttft_s", "tpot_s") for s in ("mean", "p90")]
    head = f"{'run':30s} {'TTFT mean':>10s} {'TTFT p90':>10s} {'TPOT mean':>10s} {'TPOT p90':>10s}"
    tables = (
        ("calibrated simulator vs engine", lambda v: v.rows),
        ("simulator with the run's own step times vs engine", lambda v: v.replayed_rows),
    )
    for title, rows_of in tables:
        print(f"\n{title}\n{head}")
        for label, v in results.items():
            table = {(r["metric"], r["stat"]): r["rel_error"] for r in rows_of(v)}
            if not table:
                continue
            errs = [table[c] for c in cols]
            if rows_of(v) is v.rows:
                worst = max(worst, *map(abs, errs))
            flag = "ok" if all(abs(e) <= TARGET for e in errs) else "over 10%"
            print(f"{label:30s} " + " ".join(f"{e:+10.1%}" for e in errs) + f"  {flag}")
    return worst


if __name__ == "__main__":
    main()
