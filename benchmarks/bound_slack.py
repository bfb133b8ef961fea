"""Check of the planner's cost bound: how close does a searched unit's max rate come to its offline throughput?

Usage:  python benchmarks/bound_slack.py [--workers 2]

The planner skips a candidate whose optimistic rate (offline throughput x ``BOUND_SLACK``) cannot beat the best
unit found so far (:data:`infercast.plan.planner.BOUND_SLACK`). That is only safe while no unit sustains more
than ``BOUND_SLACK`` x its offline throughput within the SLOs. This runs exhaustive plans (every candidate
searched, no bound) over a few models, GPUs, SLOs and length mixes and prints, per plan and overall, the
distribution of ``max_rate_req_s / capacity_req_s`` of the passing units, and whether the slack held.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.plan import plan  # noqa: E402
from infercast.plan.planner import BOUND_SLACK  # noqa: E402

CASES = [
    dict(
        model="llama-3.1-8b",
        gpus="l4,a100-80gb,h100-sxm",
        slo="ttft:p99:500ms tpot:p90:50ms",
        input_len=512,
        output_len=128,
    ),
    dict(model="llama-3.1-8b", gpus="h100-sxm,h200", slo="ttft:p99:2s tpot:p90:100ms", trace="azure_conv"),
    dict(model="llama-3.1-70b", gpus="h100-sxm,h200,mi300x", slo="ttft:p99:1s tpot:p90:60ms", trace="azure_code"),
    dict(
        model="qwen3-30b-a3b", gpus="h100-sxm,l40s", slo="ttft:p99:800ms tpot:p90:40ms", input_len=2048, output_len=256
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    ratios: list[float] = []
    t0 = time.perf_counter()
    for case in CASES:
        case = dict(case)
        model, gpus = case.pop("model"), case.pop("gpus")
        res = plan(
            model,
            gpus,
            tps=[1, 2, 4, 8],
            precisions="bf16,fp8",
            executor="local",
            workers=args.workers,
            exhaustive=True,
            verify=False,
            num_requests=300,
            **case,
        )
        t = res.table
        ok = t[(t["status"] == "pass") & (t["capacity_req_s"] > 0)]
        r = (ok["max_rate_req_s"] / ok["capacity_req_s"]).to_numpy(dtype=float)
        ratios.extend(r.tolist())
        lengths = case.get("trace") or f"{case['input_len']}/{case['output_len']}"
        if r.size:
            print(
                f"{model} on {gpus} ({lengths}, {case['slo']}): {r.size} passing units, max rate / offline "
                f"throughput median {np.median(r):.3f}, max {r.max():.3f}"
            )
        else:
            print(f"{model} on {gpus} ({lengths}, {case['slo']}): no passing unit")
    arr = np.array(ratios)
    verdict = "holds" if arr.size and arr.max() <= BOUND_SLACK else "VIOLATED"
    print(
        f"\nall: {arr.size} units, ratio median {np.median(arr):.3f}, p90 {np.quantile(arr, 0.9):.3f}, "
        f"max {arr.max():.3f}; BOUND_SLACK {BOUND_SLACK} {verdict} ({time.perf_counter() - t0:.0f} s)"
    )


if __name__ == "__main__":
    main()
