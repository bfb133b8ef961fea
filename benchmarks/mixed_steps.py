"""TensorRT-LLM's mixed steps, read off its closed-loop points: the evidence for an eager host floor
(``eager_layer_host_s``), which no preset adopts (docs/accuracy-notes.md: with it TPOT cross-validates better and TTFT
worse).

Usage:  python benchmarks/mixed_steps.py        (a few seconds)

A closed-loop point's mean TPOT averages decode-only steps (time D) and steps that also prefill one prompt (time
M: the records' step budget of C + L + 500 tokens holds one prompt beside the decodes, and TensorRT-LLM 1.0 runs
such steps eagerly). The share of mixed steps among a request's decode steps is the prompts started per step,
requests/s x TPOT. Two points of the same model, TP, clients and prompt length with 512 and 128 output tokens
give two equations for D and M. Printed beside them: the cost model's GPU time for the same two batches (kernels
only, no host floor). Where M exceeds that GPU time by 15 % or more with the shortest prompts (1k), the step is
host-bound, and M / layers is the host time per layer; its median over TP 4-8 and 16-64 clients is the value
that was tried. At 8 clients the same steps come out shorter (Llama-3.1-8B TP 8: 17 against 22-23 ms; Qwen3-32B
TP 8: 27 against 36-41 ms): the host time grows with the batch and levels off, which one floor per layer does not
follow, and light-load TTFT is where the floor went wrong. At 128 clients the Llama-3.1-8B runs keep clients
waiting, so fewer run than the 92 % this assumes. Longer
prompts at TP 1-2 also exceed the GPU estimate (Qwen3-32B FP8 by 15-19 % at 2k): those are GPU-bound prompt
steps the kernels under-price (1.5-3 ms per layer), not the host floor, and the TP and 1k rules leave them out.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.calibrate.predict import deployment_of, profile_for  # noqa: E402
from infercast.cost.batch import StepBatch  # noqa: E402
from infercast.cost.step import StepCostModel  # noqa: E402
from infercast.records.readers import load_records  # noqa: E402
from infercast.records.record import Record  # noqa: E402

DATA = ROOT / "data" / "measurements" / "closed_loop"
HOST_BOUND = 1.15
"""M at least this many times the kernels' time counts as host-bound."""
CLIENTS = (16, 64)
"""Loads whose D and M are read: enough prompts per step to solve for M, few enough that all clients run."""
PROMPT = 1024
"""The shortest prompts: their kernels take the least GPU time, so a host floor shows first."""
MIN_TP = 4
"""At TP 1-2 a 1k prompt's kernels alone take more than the floor (Qwen3-32B: 1.3-2.5 ms per layer)."""


def pairs() -> dict[tuple, dict[str, Record]]:
    """TensorRT-LLM closed-loop points keyed (model, tp, clients, prompt, output): TTFT and TPOT records."""
    out: dict[tuple, dict[str, Record]] = {}
    for r in load_records([DATA]):
        if r.engine == "trtllm":
            out.setdefault((r.model, r.tp, r.concurrency, r.input_len, r.output_len), {})[r.kind] = r
    return out


def decode_and_mixed(long: dict[str, Record], short: dict[str, Record]) -> tuple[float, float]:
    """(D, M) seconds from a 512- and a 128-output point: TPOT = (1 - f) D + f M, f = requests/s x TPOT."""
    rows, tpots = [], []
    for point in (long, short):
        ttft, tpot = point["serving_ttft"].value_si, point["serving_tpot"].value_si
        out = point["serving_tpot"].output_len
        per_second = point["serving_tpot"].concurrency / (ttft + (out - 1) * tpot)
        share = per_second * tpot
        rows.append([1.0 - share, share])
        tpots.append(tpot)
    d, m = np.linalg.solve(np.array(rows), np.array(tpots))
    return float(d), float(m)


def main() -> None:
    points = pairs()
    print(
        f"{'model':14} {'tp':>2} {'C':>4} {'L':>5} | {'D ms':>6} {'M ms':>6} | {'GPU D':>6} {'GPU M':>6} | "
        f"{'M/GPU':>5} {'ms/layer':>8}"
    )
    per_layer = []
    for (model, tp, c, length, out), long in sorted(points.items()):
        short = points.get((model, tp, c, length, 128))
        if out != 512 or short is None or len(long) < 2 or len(short) < 2:
            continue
        d, m = decode_and_mixed(long, short)
        rec = long["serving_tpot"]
        dep = deployment_of(rec)
        kernels = StepCostModel(dep, replace(profile_for(rec, None), eager_layer_host_s=0.0))
        running = round(0.92 * c)  # the data's running sequences at these loads (TTFT ~8 % of a request's time)
        context = length + out // 4
        gpu_d = float(kernels.step_time(StepBatch.uniform(decode_seqs=running, context=context))[0])
        gpu_m = float(
            kernels.step_time(
                StepBatch.uniform(prefill_seqs=1, chunk=length, decode_seqs=running - 1, context=context)
            )[0]
        )
        layers = dep.model.num_layers
        bound = m >= HOST_BOUND * gpu_m
        if bound and CLIENTS[0] <= c <= CLIENTS[1] and length == PROMPT and tp >= MIN_TP:
            per_layer.append(m / layers)
        print(
            f"{model:14} {tp:>2} {c:>4} {length:>5} | {d * 1e3:6.2f} {m * 1e3:6.2f} | {gpu_d * 1e3:6.2f} "
            f"{gpu_m * 1e3:6.2f} | {m / gpu_m:5.2f} {m / layers * 1e3 if bound else float('nan'):8.3f}"
        )
    values = np.array(per_layer) * 1e3
    print(
        f"\nhost-bound mixed steps (TP {MIN_TP}+, {CLIENTS[0]}-{CLIENTS[1]} clients, {PROMPT}-token prompts, "
        f"M >= {HOST_BOUND} x GPU): {values.size}; host time per layer median {np.median(values):.3f} ms "
        f"(range {values.min():.3f}-{values.max():.3f})"
    )


if __name__ == "__main__":
    main()
