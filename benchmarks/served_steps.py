"""Where a served step of this repository's engine spends its time: before the forward pass (planning, block
bookkeeping), in the forward call (Python and kernel launches; on a GPU, also the wait when the launch queue is
full), and after it (waiting for the device, sampling). Served steps with the garbage collector on and off,
then the same step shapes timed alone, back to back.

Usage:  python benchmarks/served_steps.py [DEVICE] [MODEL] [LAYERS]      # default: cuda llama-3.1-8b (all)

Engine limits and request shapes are the validation's (``validate_sim_cpu.py``/``validate_sim_gpu.py``).
``benchmarks/results/served_steps_h100.txt`` is its output on a lent H100 (2026-11-26).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from validate_sim_cpu import ENGINE_LIMITS  # noqa: E402

from infercast.harness.engine.clock import WallClock  # noqa: E402
from infercast.harness.engine.cpu_steps import RequestShape  # noqa: E402
from infercast.harness.engine.loadgen import replay  # noqa: E402
from infercast.harness.engine.paged import PagedKV, PagedRunner, SeqChunk  # noqa: E402
from infercast.harness.engine.sim_agreement import build_model, make_engine  # noqa: E402
from infercast.harness.engine.sim_twin import HarnessEngineConfig  # noqa: E402
from infercast.specs.catalog import get_model  # noqa: E402

MARKS: list[tuple[float, float]] = []
"""(entered, returned) of every forward call, perf_counter seconds."""
_FORWARD = PagedRunner.step


def _timed_forward(self: PagedRunner, prefills: list[SeqChunk], decodes: list[SeqChunk]) -> object:
    t0 = time.perf_counter()
    out = _FORWARD(self, prefills, decodes)
    MARKS.append((t0, time.perf_counter()))
    return out


def served(model, config: HarnessEngineConfig, kind: str, clients: int | None, n: int, seed: int, gc_on: bool) -> None:
    """Serve one calibration-shaped workload and print each kind of step's time and its parts (ms)."""
    MARKS.clear()
    engine = make_engine(model, config)
    (gc.enable if gc_on else gc.disable)()
    clock = WallClock()
    replay(engine, RequestShape().workload(kind, clients, n, seed), clock)
    gc.enable()
    steps = engine.steps
    marks = [(a - clock.t0, b - clock.t0) for a, b in MARKS]
    before = np.array([m[0] - s.start for m, s in zip(marks, steps, strict=True)]) * 1e3
    forward = np.array([m[1] - m[0] for m in marks]) * 1e3
    after = np.array([s.end - m[1] for m, s in zip(marks, steps, strict=True)]) * 1e3
    total = np.array([s.end - s.start for s in steps]) * 1e3
    decode_only = np.array([s.features["prefill_tokens"] == 0 for s in steps])
    mixed = np.array([s.features["prefill_tokens"] > 0 and s.features["decode_tokens"] > 0 for s in steps])
    for name, mask in (("decode-only", decode_only), ("with prompt", ~decode_only), ("mixed", mixed)):
        if mask.any():
            t, b, f, a = total[mask], before[mask], forward[mask], after[mask]
            print(
                f"  {kind} {clients} gc={'on' if gc_on else 'off'} {name:12s} n={mask.sum():4d} step ms p50 "
                f"{np.median(t):6.2f} p90 {np.percentile(t, 90):6.2f} max {t.max():7.2f} | host-before p50 "
                f"{np.median(b):5.2f} forward-call p50 {np.median(f):6.2f} p90 {np.percentile(f, 90):6.2f} | "
                f"wait p50 {np.median(a):6.2f} p90 {np.percentile(a, 90):6.2f}",
                flush=True,
            )


def alone(model) -> None:
    """The same kinds of step timed alone, back to back (median of 10 after one untimed call)."""
    kv = PagedKV(model, 16 * 40, 16)
    runner = PagedRunner(model, kv)
    tables = [list(range(s * 40, (s + 1) * 40)) for s in range(16)]

    def timed(prefills: list[SeqChunk], decodes: list[SeqChunk]) -> list[float]:
        _FORWARD(runner, prefills, decodes).argmax(dim=-1).tolist()
        times = []
        for _ in range(10):
            t = time.perf_counter()
            _FORWARD(runner, prefills, decodes).argmax(dim=-1).tolist()
            times.append(time.perf_counter() - t)
        return times

    print("isolated decode steps (batch x context -> ms):", flush=True)
    for batch in (1, 8, 16):
        for ctx in (128, 300):
            times = timed([], [SeqChunk([1], ctx - 1, tables[k], True) for k in range(batch)])
            print(f"  {batch}x{ctx}: median {statistics.median(times) * 1e3:.2f} ms, min {min(times) * 1e3:.2f}")
    for chunk in (64, 256):
        prompt = [SeqChunk(list(range(chunk)), 0, tables[0], True)]
        decodes = [SeqChunk([1], 299, tables[k + 1], True) for k in range(8)]
        for name, dec in (("prefill", []), ("mixed+8dec", decodes)):
            print(f"  {name} chunk {chunk}: median {statistics.median(timed(prompt, dec)) * 1e3:.2f} ms", flush=True)


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    model_id = sys.argv[2] if len(sys.argv) > 2 else "llama-3.1-8b"
    layers = int(sys.argv[3]) if len(sys.argv) > 3 else None
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("served_steps.py: no CUDA device here (pass cpu as the first argument to run on the CPU)")
    config = HarnessEngineConfig(get_model(model_id), num_layers=layers, scheduler="chunked", **ENGINE_LIMITS)
    model = build_model(config, device=device)
    PagedRunner.step = _timed_forward
    served(model, config, "offline", None, 8, 1, True)  # the first run of the process
    for gc_on in (True, False):
        served(model, config, "offline", None, 32, 2, gc_on)
        served(model, config, "concurrency", 6, 18, 3, gc_on)
    served(model, config, "offline", None, 32, 2, True)
    PagedRunner.step = _FORWARD
    alone(model)


if __name__ == "__main__":
    main()
