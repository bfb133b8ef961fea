"""TP scaling check: simulated closed-loop TPOT against the measured H100 TP points at low concurrency.

Usage:  python benchmarks/tp_scaling.py [--tp 8] [--concurrency 8] [--engine vllm]

For every row of /work/shared/reference/closed_loop_h100.csv (or --csv) with the given TP and concurrency, runs
the simulator as the benchmark client ran (closed loop, 10 x C requests, lengths uniform in [0.8 L, L]) and
prints measured vs simulated mean TPOT and the relative error; the last line is the median |error|.
These rows are calibration data for engine overheads (the `load` fit), not for the kernel tables, which come
from aiconfigurator's kernel measurements alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import pandas as pd  # noqa: E402

from infercast.sim.api import simulate  # noqa: E402

MODELS = {"Qwen/Qwen3-32B": "qwen3-32b", "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b"}
DEFAULT_CSV = Path("/work/shared/reference/closed_loop_h100.csv")


def simulated_tpot(row: pd.Series, requests_per_client: int = 10) -> float:
    """Mean TPOT (s) of the simulated closed-loop run matching one measured row."""
    c, isl, osl = int(row.concurrency), int(row.input_len), int(row.output_len)
    res = simulate(
        MODELS[row.model],
        "h100-sxm",
        tp=int(row.tp),
        precision=row.precision,
        engine=row.engine,
        concurrency=c,
        num_requests=requests_per_client * c,
        input_len=f"uniform:{int(0.8 * isl)},{isl}",
        output_len=f"uniform:{int(0.8 * osl)},{osl}",
    )
    return float(res.summary["tpot_s"]["mean"])


def rows(csv: Path, tp: int, concurrency: int, engine: str | None) -> pd.DataFrame:
    frame = pd.read_csv(csv)
    keep = (frame.tp == tp) & (frame.concurrency == concurrency) & frame.model.isin(MODELS)
    if engine:
        keep &= frame.engine == engine
    return frame[keep]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--engine", default=None, help="only this engine (default: all)")
    args = parser.parse_args()
    errors = []
    for _, row in rows(args.csv, args.tp, args.concurrency, args.engine).iterrows():
        sim = simulated_tpot(row) * 1e3
        err = sim / row.tpot_ms_mean - 1
        errors.append(abs(err))
        print(
            f"{row.engine:7s} {row.engine_version:14s} {MODELS[row.model]:13s} {row.precision:5s} tp{row.tp} "
            f"c{row.concurrency} {row.input_len}/{row.output_len}: measured {row.tpot_ms_mean:6.2f} ms, "
            f"simulated {sim:6.2f} ms ({err:+.1%})"
        )
    if errors:
        print(f"median |error| {statistics.median(errors):.1%} over {len(errors)} points")


if __name__ == "__main__":
    main()
