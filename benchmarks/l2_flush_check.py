"""Which L2 flush makes a lone GEMM's time match the same GEMM inside a layer stack (CUDA only).

The harness times each GEMM alone, evicting the L2 cache before every repeat (harness/timing.py). This script
times one decoder layer's GEMMs of a model three ways, at several token counts M:

* ``none``: no flush (small weights are served from L2: too fast);
* ``write``: ``zero_()`` of twice the L2 (the harness before 2026-11-26): the L2 is left full of dirty lines,
  which the timed GEMM must write back to HBM;
* ``read``: a reduction over twice the L2 (the harness now): the same eviction, lines left clean;

and beside them the ground truth a serving step sees: a stack of ``--layers`` layers, each with its own
weights (so nothing stays in L2), run back to back and divided by the layer count. The per-layer sum of the
lone GEMMs under each flush is compared with it.

    python benchmarks/l2_flush_check.py [--model llama-3.1-8b] [--layers 8] [--tokens 1,8,128,2048]

Prints one table; a CPU-only machine gets a one-line message (exit 0): there is no L2 to flush.
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F

from infercast.harness.microbench import gemm_shapes
from infercast.harness.timing import Timer
from infercast.specs.catalog import get_model

LAYER_GEMMS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


class WriteFlushTimer(Timer):
    """The harness's timer with the old, writing flush."""

    def flush(self) -> None:
        if self._scratch is not None:
            self._scratch.zero_()


def events_median(fn, repeats: int = 20, warmup: int = 3) -> float:
    """Median seconds of ``fn()`` between CUDA events, no flush (the stack evicts its own weights)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--tokens", default="1,8,128,2048")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(f"l2_flush_check: torch {torch.__version__} sees no CUDA GPU; nothing to measure")
        return
    device = torch.device("cuda")
    shapes = {name: (k, n) for name, k, n in gemm_shapes(get_model(args.model)) if name in LAYER_GEMMS}
    dtype = torch.bfloat16
    weights = [
        {name: torch.randn((n, k), device=device, dtype=dtype) for name, (k, n) in shapes.items()}
        for _ in range(args.layers)
    ]
    timers = {
        "none": Timer(device, warmup=3, repeats=20, flush_l2=False),
        "write": WriteFlushTimer(device, warmup=3, repeats=20),
        "read": Timer(device, warmup=3, repeats=20),
    }
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {args.model}, {args.layers}-layer stack")
    print(f"{'M':>5} {'gemm':>12} " + " ".join(f"{m + ' us':>9}" for m in timers))
    rows = []
    for m in (int(t) for t in args.tokens.split(",")):
        inputs = {name: torch.randn((m, k), device=device, dtype=dtype) for name, (k, n) in shapes.items()}
        lone = {mode: 0.0 for mode in timers}
        for name in shapes:
            a, w = inputs[name], weights[0][name]
            per = {mode: timer(lambda a=a, w=w: F.linear(a, w)) for mode, timer in timers.items()}
            print(f"{m:>5} {name:>12} " + " ".join(f"{per[mode] * 1e6:9.1f}" for mode in timers))
            for mode in timers:
                lone[mode] += per[mode]

        def stack(inputs=inputs) -> None:
            for layer in weights:
                for name in shapes:
                    F.linear(inputs[name], layer[name])

        rows.append((m, events_median(stack) / args.layers, lone))
    print(f"\n{'M':>5} {'stack us/layer':>15} " + " ".join(f"{mode + ' sum':>10} {'ratio':>6}" for mode in timers))
    for m, truth, lone in rows:
        cells = " ".join(f"{lone[mode] * 1e6:10.1f} {lone[mode] / truth:6.3f}" for mode in timers)
        print(f"{m:>5} {truth * 1e6:15.1f} {cells}")


if __name__ == "__main__":
    main()
