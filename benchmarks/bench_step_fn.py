"""Why the simulator's step-time function is generated code: compiled (``exec`` of straight-line Python, one
block per operator, :func:`infercast.cost.compiled.compile_scalar`) against the same arithmetic interpreted
(a loop over the operators' coefficient rows), per call, for the prefill steps of the simulator's hot loop.

Usage:  python benchmarks/bench_step_fn.py [--model llama-3.1-8b] [--calls 200000]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.cost.batch import FEATURES, StepBatch  # noqa: E402
from infercast.cost.compiled import compile_scalar  # noqa: E402
from infercast.cost.step import cost_model  # noqa: E402
from infercast.specs.deployment import Deployment  # noqa: E402


def interpreted(model):
    """The compiled function's arithmetic as a loop over operators (no measured curves: tp=1 models only)."""
    if model.curves:
        raise SystemExit("pick a deployment without measured collective curves (tp=1)")
    n, p = model.n_ops, model.profile
    ops = []
    for i in range(n):
        compute = [(j, float(c) * float(model.inv_peak_eff[i, 0])) for j, c in enumerate(model.coef[i]) if c]
        memory = [(j, float(c) * float(model.inv_bw[i, 0])) for j, c in enumerate(model.coef[n + i]) if c]
        rows = [(j, float(c)) for j, c in enumerate(model.coef[2 * n + i]) if c]
        per_decode = sum(float(s) for j, s in model.per_decode if j == i)
        ops.append(
            (
                int(model.active[i]),
                compute,
                memory,
                rows,
                float(model.m_half[i, 0]),
                float(model.kernels[i, 0]),
                float(model.latency[i, 0]),
                per_decode,
            )
        )
    moe, log1m = bool(model.table.moe_k_over_e), float(model.log1m_k_over_e) if model.table.moe_k_over_e else 0.0
    floor = float(p.gemm_m_floor)
    tokens_i, seqs_i, decode_i = FEATURES.index("tokens"), FEATURES.index("seqs"), FEATURES.index("decode_tokens")

    def step_time(x: list[float]) -> float:
        tokens = x[tokens_i]
        xs = [*x, -math.expm1(tokens * log1m) if moe and tokens > 0 else 0.0]
        pk = p.kernel_overhead_graph_s if tokens <= p.graph_max_tokens else p.kernel_overhead_eager_s
        total = 0.0
        for active, compute, memory, rows, m_half, kernels, latency, per_decode in ops:
            if xs[active] <= 0:
                continue
            c = sum(k * xs[j] for j, k in compute)
            if c and m_half:
                r = max(sum(k * xs[j] for j, k in rows), floor)
                c = c * (r + m_half) / r
            m = sum(k * xs[j] for j, k in memory)
            total += max(c, m) + kernels * pk + latency + per_decode * xs[decode_i]
        return total + (p.step_overhead_s + p.seq_overhead_s * x[seqs_i] if tokens > 0 else 0.0)

    return step_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--calls", type=int, default=200_000)
    args = parser.parse_args()
    model = cost_model(Deployment.resolve(args.model, "h100-sxm"))
    compiled, loop = compile_scalar(model), interpreted(model)
    batch = StepBatch.from_items([(400, 1200), (300, 0)], [900, 2100, 40, 3000, 512], prefill_samples=1)
    x = batch.x[:, 0].tolist()
    named = dict(zip(FEATURES, x, strict=True))
    assert math.isclose(compiled(**named), loop(x), rel_tol=1e-12), (compiled(**named), loop(x))
    timings = {}
    for name, call in (("compiled", lambda: compiled(**named)), ("interpreted", lambda: loop(x))):
        t0 = time.perf_counter()
        for _ in range(args.calls):
            call()
        timings[name] = (time.perf_counter() - t0) / args.calls * 1e6
    fast, slow = timings["compiled"], timings["interpreted"]
    print(
        f"{args.model}: {model.n_ops} operators; per call: compiled {fast:.2f} us, interpreted {slow:.2f} us "
        f"({slow / fast:.1f}x)"
    )


if __name__ == "__main__":
    main()
