"""Planner speed: a ~1,000-candidate plan for Llama-3.1-70B at 20 req/s, p99 TTFT 500 ms, p90 TPOT 50 ms.

Usage:  python benchmarks/bench_plan.py [--workers 2] [--exhaustive] [--trace azure_conv | --input-len N --output-len N]

Grid: 6 GPU types (h100-sxm, h200, a100-80gb, l40s, b200, mi300x) x TP 1,2,4,8 x bf16/fp8 x
(aggregated with max running requests 128/256/512 x chunk budget 2048/8192, or disaggregated prefill:decode
1:1, 1:2, 1:3, 2:1 with every prefill x decode TP) = 1,056 candidates. Request lengths from the Azure
conversation trace (400 per probe). Prints the time of each phase, candidates/s and simulations/s (the
machine may be shared: both throughputs are printed so runs can be compared), the chosen configuration and
the fleet check: the chosen fleet simulated at 20 req/s must meet the SLO. Target: under 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.plan import plan  # noqa: E402

GPUS = "h100-sxm,h200,a100-80gb,l40s,b200,mi300x"
SLO = "ttft:p99:500ms tpot:p90:50ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--exhaustive", action="store_true", help="search every candidate (no cost bound)")
    parser.add_argument("--trace", default="azure_conv")
    parser.add_argument("--input-len", type=int)
    parser.add_argument("--output-len", type=int)
    parser.add_argument("--rate", type=float, default=20.0)
    args = parser.parse_args()
    lengths = {"input_len": args.input_len, "output_len": args.output_len} if args.input_len else {"trace": args.trace}
    t0 = time.perf_counter()
    res = plan(
        "llama-3.1-70b",
        GPUS,
        slo=SLO,
        rate=args.rate,
        precisions="bf16,fp8",
        tps=[1, 2, 4, 8],
        max_num_seqs=[128, 256, 512],
        max_num_batched_tokens=[2048, 8192],
        disagg="1:1,1:2,1:3,2:1",
        workers=args.workers,
        exhaustive=args.exhaustive,
        **lengths,
    )
    wall = time.perf_counter() - t0
    cpu = sum(
        resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    st = res.stats
    load = os.getloadavg()[0]
    print(
        f"grid      : {st['candidates']:,} candidates ({GPUS}; TP 1-8; bf16/fp8; agg x 6 knob sets, disagg x 4 "
        f"ratios x prefill/decode TP)"
    )
    print(
        f"traffic   : {res.settings['traffic']}, {res.settings['probe_requests']} requests per probe; SLO "
        f"{res.settings['slo_text']}"
    )
    print(
        f"outcome   : {st['pruned']} pruned analytically, {st['bounded']} cut by the cost bound, {st['searched']} "
        f"searched, {st['passing']} pass"
    )
    print(
        f"time      : {wall:.1f} s total on {args.workers} workers (prune {st['seconds_prune']:.1f} s, "
        f"search {st['seconds_search']:.1f} s, fleet check "
        f"{st['seconds_fleet']:.1f} s); {cpu:.1f} CPU-s in all; load average {load:.1f} at the end"
    )
    print(
        f"throughput: {st['candidates'] / wall:.1f} candidates/s, {st['simulations']:,} simulations at "
        f"{st['simulations_per_second']:.1f}/s ({st['searched'] / max(st['seconds_search'], 1e-9):.1f} "
        "searched candidates/s)"
    )
    c, f = res.chosen, res.fleet_check
    if c is None:
        print("chosen    : none passes")
        return
    print(
        f"chosen    : {c['label']}: {c['max_rate_req_s']:.3g} req/s per unit, {f['replicas']} units "
        f"({f['replicas'] * c['gpus_per_unit']} GPUs), ${c['fleet_usd_per_hour']:.2f}/h, "
        f"${c['usd_per_mtok_output']:.3g}/Mtok output"
    )
    measured = ", ".join(f"{k} {v:.0f} ms" for k, v in f["slo_measured_ms"].items())
    print(
        f"fleet     : at {f['rate_req_s']:g} req/s {'MEETS' if f['passes'] else 'MISSES'} the SLO in simulation "
        f"({measured}; goodput {f['goodput_req_s']:.2f} req/s = {f['slo_attainment']:.1%} of requests within "
        "every limit)"
    )
    print(f"target    : under 60 s on 2 cores -> {'met' if wall < 60 else 'NOT met'}")


if __name__ == "__main__":
    main()
