"""What the closed-loop TTFT measurements say that the simulator does not reproduce (a diagnostic, no fit).

Usage:  python benchmarks/ttft_signatures.py

Reads data/measurements/closed_loop/h100-sxm.csv (mean TTFT / TPOT under closed-loop concurrency) and prints
two signatures, with infercast's kernel-level prefill time for comparison:

1. Prompt slope at the lowest concurrency. Per engine, model and TP: how much mean TTFT grows per prompt
   token between the shortest and the longest prompt, divided by how much the kernel-level prefill time
   (``predict`` at batch 1, without the per-request overhead) grows. A ratio near 1 means TTFT grows as the
   GPU's prefill does (what the simulator assumes at light load); well above 1 means latency proportional to
   the prefill that the simulator lacks. TPOT under the same load follows the kernel-level prefill cost
   (benchmarks/accuracy.py), so that extra latency does not occupy the GPU.
2. Output slope. Per engine, model, TP, prompt length and concurrency C: how much mean TTFT grows per output
   token (between the shortest and the longest output), in units of the measured TPOT. A closed loop whose
   engine holds only K < C requests at once makes each request wait (C/K - 1) x its decode time, so the slope
   is C/K - 1; the implied K is printed (K = C means no such wait).
3. KV capacity of the fp8 runs. Per engine and point with the most KV in flight (clients x (prompt + output)):
   how many of the C requests a 16-bit and an 8-bit KV cache hold at once (infercast's memory budget), next to
   the measured mean TTFT and the TTFT of a single prefill: a cache that holds far fewer than C requests makes
   the rest queue for whole request durations, which a TTFT of a few prefills rules out
   (scripts/import_closed_loop.py reads the TensorRT-LLM fp8 rows with an 8-bit cache on this evidence).
4. Throughput ceilings (Little's law on the measured means). At the highest concurrency of every engine, model,
   TP and length pair: with D = (output - 1) x TPOT one request's decode time, a closed loop of C clients with no
   think time holds K = C x D / (D + TTFT) requests between first and last token, serves C / (D + TTFT)
   requests/s and streams K / TPOT output tokens/s. The same figures from the simulated means (the fitted
   profile, the records' engine settings) stand beside them. A ceiling that stays put while TP (and with it the
   GPU time) changes is host-side work the cost model does not price; where the simulator runs all C requests
   at about the measured TPOT, it books that time as decoding instead of as TTFT.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import infercast  # noqa: E402
from infercast.calibrate.serving import closed_loop_rates  # noqa: E402

DATA = ROOT / "data" / "measurements" / "closed_loop" / "h100-sxm.csv"


def load() -> pd.DataFrame:
    d = pd.read_csv(DATA, comment="#")
    d = d[d.output_len < 1000]  # the sweep grid (the few 4000/1000 points come from another harness)
    wide = d.pivot_table(
        index=["engine", "model", "precision", "tp", "input_len", "output_len", "concurrency"],
        columns="kind",
        values="value",
    ).reset_index()
    return wide.rename(columns={"serving_ttft": "ttft_ms", "serving_tpot": "tpot_ms", "concurrency": "c"})


def prefill_ms(model: str, precision: str, tp: int, engine: str, input_len: int) -> float:
    p = infercast.predict(
        model, "h100-sxm", tp=tp, precision=precision, engine=engine, input_len=input_len, output_len=16
    )
    return p.prefill.time_s * 1e3


def prompt_slopes(d: pd.DataFrame) -> None:
    print("1. TTFT growth per prompt token at the lowest concurrency / kernel-level prefill growth")
    print(f"{'engine':8} {'model':14} {'tp':>3} {'C':>4} {'measured us/tok':>16} {'prefill us/tok':>15} {'ratio':>6}")
    for (engine, model, prec, tp), g in d.groupby(["engine", "model", "precision", "tp"]):
        g = g[g.c == g.c.min()]
        lo, hi = g.input_len.min(), g.input_len.max()
        if lo == hi:
            continue
        measured = (g[g.input_len == hi].ttft_ms.mean() - g[g.input_len == lo].ttft_ms.mean()) / (hi - lo)
        kernel = (prefill_ms(model, prec, tp, engine, hi) - prefill_ms(model, prec, tp, engine, lo)) / (hi - lo)
        print(
            f"{engine:8} {model:14} {tp:>3} {g.c.min():>4} {measured * 1e3:>16.1f} {kernel * 1e3:>15.1f} "
            f"{measured / kernel:>6.2f}"
        )


def output_slopes(d: pd.DataFrame) -> None:
    print("\n2. TTFT growth per output token / TPOT, and the implied concurrent capacity K = C / (1 + slope)")
    rows = []
    for (engine, model, tp, _isl, c), g in d.groupby(["engine", "model", "tp", "input_len", "c"]):
        lo, hi = g.output_len.min(), g.output_len.max()
        if lo == hi:
            continue
        slope = (g[g.output_len == hi].ttft_ms.mean() - g[g.output_len == lo].ttft_ms.mean()) / (hi - lo)
        ratio = slope / g.tpot_ms.mean()
        rows.append((engine, model, tp, c, ratio, c / (1 + ratio)))
    r = pd.DataFrame(rows, columns=["engine", "model", "tp", "C", "slope_over_tpot", "K"])
    r["C_minus_K"] = r.C - r.K
    summary = (
        r[r.C <= 64]
        .groupby(["engine", "model"])
        .agg(
            points=("K", "size"),
            median_C_minus_K=("C_minus_K", "median"),
            p10=("C_minus_K", lambda x: np.quantile(x, 0.1)),
            p90=("C_minus_K", lambda x: np.quantile(x, 0.9)),
        )
    )
    print("concurrency <= 64 (C - K: clients effectively waiting for a slot):")
    print(summary.round(2).to_string())


def kv_capacity(d: pd.DataFrame) -> None:
    print("\n3. KV capacity of the fp8 runs at the points with the most KV in flight")
    print(
        f"{'engine':8} {'tp':>3} {'C':>4} {'prompt':>6} {'out':>4} {'fits 16-bit':>11} {'fits 8-bit':>10} "
        f"{'TTFT ms':>8} {'prefill ms':>10}"
    )
    fp8 = d[d.precision == "fp8"].assign(kv=lambda x: x.c * (x.input_len + x.output_len))
    for (engine, tp), g in fp8.groupby(["engine", "tp"]):
        for _, r in g.nlargest(2, "kv").iterrows():
            context = int(r.input_len + r.output_len)
            budgets = [
                infercast.memory_budget(
                    r.model, "h100-sxm", tp=int(tp), precision="fp8", kv_precision=kv, engine=engine
                )
                for kv in ("bf16", "fp8")
            ]
            fits = [b.max_concurrency(context) for b in budgets]
            pre = prefill_ms(r.model, "fp8", int(tp), engine, int(r.input_len))
            print(
                f"{engine:8} {tp:>3} {r.c:>4} {r.input_len:>6} {r.output_len:>4} {fits[0]:>11} {fits[1]:>10} "
                f"{r.ttft_ms:>8.0f} {pre:>10.0f}"
            )


def simulated_means(records: list, row: pd.Series) -> tuple[float, float]:
    """Simulated mean TTFT and TPOT (ms) of one closed-loop point, read as ``benchmarks/accuracy.py`` reads it."""
    from infercast.calibrate.predict import predict_record

    recs = [
        r
        for r in records
        if r.engine == row.engine
        and r.model == row.model
        and r.precision == row.precision
        and r.tp == row.tp
        and r.concurrency == row.c
        and r.input_len == row.input_len
        and r.output_len == row.output_len
    ]
    by_kind = {r.kind: predict_record(r) * 1e3 for r in recs}
    return by_kind["serving_ttft"], by_kind["serving_tpot"]


def ceilings(d: pd.DataFrame) -> None:
    print("\n4. Throughput at the highest concurrency (Little's law on mean TTFT / TPOT): measured | simulated")
    print(
        f"{'engine':8} {'model':14} {'prompt':>6} {'out':>4} {'C':>4} {'tp':>3} {'K':>6} {'req/s':>6} "
        f"{'tok/s':>6} | {'K':>6} {'req/s':>6} {'tok/s':>6} {'TTFT ms':>15}"
    )
    from infercast.records.readers import load_records

    records = load_records([DATA])
    top = d[d.c == d.groupby(["engine", "model", "precision"]).c.transform("max")]
    for (engine, model, isl, osl), g in top.groupby(["engine", "model", "input_len", "output_len"]):
        for _, r in g.sort_values("tp").iterrows():
            k, rate, tok = closed_loop_rates(r.c, r.ttft_ms / 1e3, r.tpot_ms / 1e3, int(r.output_len))
            sim_ttft, sim_tpot = simulated_means(records, r)
            ks, rates, toks = closed_loop_rates(r.c, sim_ttft / 1e3, sim_tpot / 1e3, int(r.output_len))
            print(
                f"{engine:8} {model:14} {isl:>6} {osl:>4} {r.c:>4} {r.tp:>3} {k:>6.0f} {rate:>6.1f} {tok:>6.0f} | "
                f"{ks:>6.0f} {rates:>6.1f} {toks:>6.0f} {r.ttft_ms:>7.0f}/{sim_ttft:<7.0f}"
            )


def main() -> None:
    d = load()
    prompt_slopes(d)
    output_slopes(d)
    kv_capacity(d)
    ceilings(d)


if __name__ == "__main__":
    main()
