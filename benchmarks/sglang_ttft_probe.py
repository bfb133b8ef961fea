"""Probes of the SGLang TTFT under-prediction on the silicon set (docs/accuracy-notes.md, "SGLang TTFT under load").

Prints, for the SGLang closed-loop points (the 46 H200 Llama-3.1-8B rows left aside):

- ``reservation``: the bound C x (ISL + OSL) / KV-pool tokens of each point next to its TTFT error. SGLang's
  PrefillAdder reserves ``new_token_ratio`` (<= 0.7) of each running request's remaining output; a running request
  never holds or reserves more than its ISL + OSL, so below 1 the reservation cannot hold a prompt back.
- ``--differential CSV`` (a ``silicon_groups.py --csv`` file): per engine and GPU, at <= 8 clients, how much
  TTFT an 8k prompt adds over a 1k one (same model, precision, TP, clients), predicted / measured: the
  prompt-length part of TTFT with little queueing.
- ``--prefill-scale K``: TTFT / TPOT errors with every step that computes prompt tokens made K times longer (a
  diagnostic of the cost layer, not a model).

Usage: PYTHONPATH=src python benchmarks/sglang_ttft_probe.py [--prefill-scale 2.0] [--workers 2] [--differential CSV]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from silicon_groups import held_out_records

from infercast.calibrate.predict import deployment_of
from infercast.calibrate.validation import compare_each
from infercast.errors import InfercastError
from infercast.memory import memory_budget
from infercast.records.record import Record
from infercast.sim import replica


def sglang_records() -> list[Record]:
    """The SGLang closed-loop records of the held-out silicon set, without the H200 Llama-3.1-8B rows."""
    recs, _ = held_out_records()
    return [r for r in recs if r.engine.startswith("sglang") and not (r.gpu == "h200" and "llama" in r.model)]


def pool_tokens(rec: Record) -> float | None:
    """Tokens the simulated KV pool holds for ``rec``'s deployment and launch settings (None: not resolvable)."""
    try:
        dep = deployment_of(rec)
        mem = memory_budget(
            dep,
            gpu_memory_utilization=rec.gpu_memory_utilization or None,
            block_size=None,
            max_num_batched_tokens=rec.max_num_batched_tokens or dep.engine.max_num_batched_tokens,
            max_num_seqs=rec.concurrency,
        )
    except InfercastError:
        return None
    blocks = mem.num_blocks - rec.concurrency * mem.state_blocks_per_sequence
    return float(blocks * mem.block_size)


def scale_prefill(k: float) -> None:
    """Make every simulated step with prompt tokens ``k`` times longer (both of a run's replicas' cost paths)."""
    build = replica.Replica._build_costs

    def patched(self, dep, config, profile):  # type: ignore[no-untyped-def]
        build(self, dep, config, profile)
        step = self.step_fn
        self.step_fn = lambda **f: step(**f) * (k if f["prefill_tokens"] > 0 else 1.0)

    replica.Replica._build_costs = patched  # type: ignore[method-assign]


def differential(path: str) -> None:
    """Print predicted / measured of the TTFT an 8192-token prompt adds over a 1024-token one (OSL 1024, <= 8
    clients), median per engine family and GPU."""
    d = pd.read_csv(path)
    d = d[(d.metric == "ttft") & (d.clients <= 8) & (d.osl == 1024)]
    d = d[~((d.gpu == "h200") & d.model.str.contains("llama"))].assign(engine=d.engine.str.split("-").str[0])
    key = ["engine", "model", "gpu", "precision", "tp", "clients"]
    short = d[d.isl == 1024].groupby(key)[["measured", "predicted"]].median()
    long = d[d.isl == 8192].groupby(key)[["measured", "predicted"]].median()
    delta = (long - short).dropna().reset_index()
    delta["ratio"] = delta.predicted / delta.measured
    print("8k-1k TTFT difference, predicted / measured (<= 8 clients):")
    print(delta.groupby(["engine", "gpu"]).ratio.agg(["median", "count"]).round(2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefill-scale", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--differential", metavar="CSV", help="only the 8k-1k TTFT difference of a silicon_groups CSV")
    args = ap.parse_args()
    if args.differential:
        differential(args.differential)
        return
    if args.prefill_scale != 1.0:
        scale_prefill(args.prefill_scale)
    recs = sglang_records()
    compared, _ = compare_each(recs, None, workers=args.workers)
    rows = []
    for c in compared:
        r = c.record
        pool = pool_tokens(r)
        bound = r.concurrency * (r.input_len + r.output_len) / pool if pool else float("nan")
        metric = r.kind.removeprefix("serving_")
        rows.append(dict(metric=metric, clients=r.concurrency, isl=r.input_len, error=c.error, bound=bound))
    d = pd.DataFrame(rows)
    for metric, g in d.groupby("metric"):
        e = g.error
        print(
            f"{metric}: {len(g)} points, median |error| {e.abs().median():.1%}, MAPE {e.abs().mean():.1%}, "
            f"signed median {e.median():+.1%}"
        )
    t = d[d.metric == "ttft"].copy()
    t["ratio"] = 1.0 + t.error
    t["load"] = pd.cut(t.clients, [0, 8, 32, 128, 4096])
    print("\nTTFT predicted / measured by prompt length and clients (median):")
    print(t.pivot_table(index="isl", columns="load", values="ratio", aggfunc="median", observed=True).round(2))
    t["reservation bound"] = pd.cut(t.bound, [0, 0.1, 0.25, 0.5, 1.0, 100])
    print("\nTTFT by the reservation bound C x (ISL + OSL) / pool tokens (NaN: pool not resolvable):")
    agg = t.groupby("reservation bound", dropna=False, observed=False)
    print(agg.agg(points=("ratio", "size"), ratio=("ratio", "median"), abs_error=("error", lambda e: e.abs().median())))


if __name__ == "__main__":
    main()
