"""Simulator speed: one million requests of the Azure conversation trace, tiled.

Usage:  python benchmarks/bench_sim.py [--requests 1000000] [--scheduler chunked] [--engine vllm]

Continuous batching with chunked prefill (vLLM V1-style), Llama-3.1-8B on one H100 SXM, the trace's own
arrival rate (~5.5 req/s) repeated back to back. Prints wall time of the simulation (one Python thread),
requests/s, peak memory, and the headline metrics. Target: 1,000,000 requests in under 20 s. ``--engine trtllm``
prices the same run with TensorRT-LLM's profile, whose fitted API-server front-end (``stream_token_s``) routes
every arrival in time order instead of handing each replica its share up front.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.sim.api import simulate  # noqa: E402
from infercast.sim.workload import builtin_trace  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--scheduler", default="chunked")
    parser.add_argument("--engine", default="vllm")
    args = parser.parse_args()
    t0 = time.perf_counter()
    base = builtin_trace("azure_conv")
    work = base.tile(-(-args.requests // len(base))).head(args.requests)
    t1 = time.perf_counter()
    simulate("llama-3.1-8b", "h100-sxm", workload=work.head(1000), scheduler=args.scheduler, engine=args.engine)
    t2 = time.perf_counter()
    res = simulate("llama-3.1-8b", "h100-sxm", workload=work, scheduler=args.scheduler, engine=args.engine)
    t3 = time.perf_counter()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = res.summary
    print(
        f"workload : {len(work):,} requests ({base.name} x {len(work) / len(base):.1f}), "
        f"{work.duration / 3600:.1f} h of traffic, built in {t1 - t0:.2f} s"
    )
    print(
        f"simulate : {t3 - t2:.2f} s wall = {len(work) / (t3 - t2):,.0f} requests/s, {s['steps']:,} engine steps "
        f"(target: 1,000,000 requests < 20 s)"
    )
    print(f"memory   : peak RSS {peak_mb:,.0f} MB")
    print(
        f"metrics  : TTFT mean {s['ttft_s']['mean'] * 1e3:.1f} ms p99 {s['ttft_s']['p99'] * 1e3:.1f} ms | "
        f"TPOT mean {s['tpot_s']['mean'] * 1e3:.2f} ms p99 {s['tpot_s']['p99'] * 1e3:.2f} ms | "
        f"{s['output_throughput_tok_s']:,.0f} output tok/s | saturated: {s['saturated']}"
    )


if __name__ == "__main__":
    main()
