"""The simulator against the real engine on a GPU: three loads x two schedulers, TTFT/TPOT/ITL/E2E.

Usage:  python benchmarks/validate_sim_gpu.py [--gpu h100-sxm] [--model llama-3.1-8b] [--layers N]
                                              [--duration 20] [--out DIR] [--device cuda]

The same procedure as ``validate_sim_cpu.py`` (same request distributions, engine limits, loads and
schedulers), with the model on a GPU: the catalog's spec of that GPU (datasheet peaks) replaces the measured CPU
peaks, and the cost model's efficiencies and overheads are fitted to the engine's own served steps on it
(``harness.engine.cpu_steps.calibrate`` with ``hardware``). The engine is this repository's
(``harness/engine/``): paged KV, continuous batching, eager PyTorch, one Python process; its per-step host time
is part of what the fit must carry.

Writes ``DIR/validate_sim_gpu.json``/``.csv`` (after every run) and the CDF plot. The H100 runs of 2026-11-26 are
``benchmarks/results/validate_sim_gpu*_h100_run1.*`` (``--warmup-s 0 --duration 15``) and ``*_run2.*``
(``--warmup-s 50 --duration 8``, four of six runs); those of 2026-11-27, with the host floor in the GPU fit, are
``*_run3.*`` (the floor stuck at its start) and ``*_run4.*`` (fitted from two starts; ``--warmup-s 50 --duration
8``); README, "On a GPU". ``--device cpu`` runs the same code on the CPU
(a smoke test of the script; the numbers then describe nothing).
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
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from validate_sim_cpu import ENGINE_LIMITS, _print, _verdict, load_runs  # noqa: E402

from infercast.harness.engine.clock import WallClock  # noqa: E402
from infercast.harness.engine.cpu import fit_params  # noqa: E402
from infercast.harness.engine.cpu_steps import RequestShape, calibrate  # noqa: E402
from infercast.harness.engine.loadgen import replay  # noqa: E402
from infercast.harness.engine.sim_agreement import Validation, build_model, make_engine, plot_cdfs  # noqa: E402
from infercast.harness.engine.sim_twin import HarnessEngineConfig  # noqa: E402
from infercast.specs.catalog import get_hardware, get_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h100-sxm", help="catalog id of the GPU the engine runs on")
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--layers", type=int, default=None, help="first N layers only (default: all)")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds of arrivals per run")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--warmup-s",
        type=float,
        default=60.0,
        help="serve unmeasured requests this long before calibrating (see _warm_up)",
    )
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit(
            f"validate_sim_gpu.py: torch {torch.__version__} sees no CUDA device (--device cpu runs the script "
            "on the CPU as a smoke test)"
        )
    out = Path(args.out)
    t0 = time.perf_counter()
    hardware = get_hardware(args.gpu)
    base = HarnessEngineConfig(get_model(args.model), num_layers=args.layers, precision=args.precision, **ENGINE_LIMITS)
    model = build_model(base, device=args.device)
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(
        f"{base.model_cut.id} ({base.model_cut.num_layers} layers, {args.precision}) on {device_name}; "
        f"priced as {hardware.name}",
        flush=True,
    )
    _warm_up(model, base, args.warmup_s)
    hardware, profile, peaks, fit = calibrate(model, base, threads=1, repeats=3, hardware=hardware)
    held = fit["held_out"]
    print(
        f"calibration: {fit['points']} served steps; on rounds held out: per step mean |error| "
        f"{held['mean_abs_rel_error']:.1%}, summed time {held['total_rel_error']:+.1%} (decode "
        f"{held['decode_total_rel_error']:+.1%}, prefill {held['prefill_total_rel_error']:+.1%}, mixed "
        f"{held['mixed_total_rel_error']:+.1%})",
        flush=True,
    )
    fitted = {k.format(key=args.precision): profile.flat()[k.format(key=args.precision)] for k in fit_params(hardware)}
    print("fitted: " + ", ".join(f"{k} {v:.3g}" for k, v in fitted.items()), flush=True)
    results: dict[str, Validation] = {}
    rows = []
    for scheduler, load, rate, n, v in load_runs(
        model, base, hardware, profile, duration=args.duration, seed=args.seed, threads=1
    ):
        label = f"{scheduler}/{load}"
        results[label] = v
        for row in v.rows:
            rows.append(
                {
                    "scheduler": scheduler,
                    "load": load,
                    "rate_req_s": rate,
                    "requests": n,
                    **row,
                    "speed_factor": v.info["speed_factor"],
                    "step_time_ratio_sum": v.info["step_time_ratio_sum"],
                }
            )
        _print(label, rate, v)
        meta = {
            "model": base.model_cut.id,
            "layers": base.model_cut.num_layers,
            "precision": args.precision,
            "device": device_name,
            "gpu_spec": hardware.id,
            "torch": str(torch.__version__),
            "calibration": {k: v for k, v in fit.items() if k not in ("grid", "runs")},
            "peaks": peaks,
            "profile": profile.flat(),
            "wall_s": time.perf_counter() - t0,
            "loadavg_end": os.getloadavg(),
            "runs": {k: v.to_dict() for k, v in results.items()},
        }
        _write(out, rows, meta)  # after every run: a run cut short keeps what it measured
    meta["worst_rel_error"] = _verdict(results)
    _write(out, rows, meta)
    plot = plot_cdfs(results, out / "validate_sim_gpu_cdf.png")
    print(
        f"\nwrote {out / 'validate_sim_gpu.csv'}, {out / 'validate_sim_gpu.json'}, {plot}; "
        f"{time.perf_counter() - t0:.0f} s"
    )


def _warm_up(model, config: HarnessEngineConfig, seconds: float) -> None:
    """Serve the calibration's request shapes, unmeasured, for ``seconds``. On the lent H100 (2026-11-26) the
    engine's served steps took 2x as long in the first minute as afterwards (decode 72-86 ms, then 34-36 ms;
    a one-off probe), so a calibration taken cold described a slower engine than the runs it predicted."""
    t0, k = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        replay(make_engine(model, config), RequestShape().workload("offline", None, 32, 5000 + k), WallClock())
        k += 1
    print(f"warm-up: {k} unmeasured offline runs of 32 requests in {time.perf_counter() - t0:.0f} s", flush=True)


def _write(out: Path, rows: list[dict], meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "validate_sim_gpu.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out / "validate_sim_gpu.json").write_text(json.dumps(meta, indent=1, default=float))


if __name__ == "__main__":
    main()
