"""Fuzz campaign over every input boundary (issues 10 and 37): runs N generated cases and prints how many ended in
a traceback, a hang, a silent wrong answer or a malformed error, per boundary.

Boundaries: the CLI's predict, memory, sweep, simulate, compare / select / crossover / roofline and plan;
config.json, hardware YAML, traces, output paths, benchmark result files (vLLM, GuideLLM, AIPerf) and measurement
CSVs read by validate / calibrate; the CPU engine's validate-sim / calibrate-cpu; the ``serve`` endpoint; and the
Python API.

    python scripts/fuzz_campaign.py                 # 3,200 cases, split by WEIGHTS (~20 min on 2 shared cores)
    python scripts/fuzz_campaign.py --cases 400 --seed 7 --show 5 --only serve,python_api

The cases come from the hypothesis strategies of tests/fuzz_harness.py (the same ones tests/test_fuzz_*.py
runs in CI with fewer examples); each runs in-process through the real ``infercast`` entry point with a
wall-clock limit. Exit status 1 if any case failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from tests.fuzz_harness import ALL_STRATEGIES, OUTCOMES, Case, run_case  # noqa: E402

WEIGHTS = {"cli_plan": 0.5, "bench_files": 0.6, "data_csv": 0.6, "cli_simulate": 0.8, "traces": 0.8}
"""Share of an even split each boundary gets (1 when not listed): plan, calibrate and simulation cases that succeed
take seconds, error cases milliseconds."""


def campaign(
    cases: int, seed_value: int, seconds: float, only: list[str] | None = None
) -> tuple[dict[str, Counter], dict[str, list[str]]]:
    counts: dict[str, Counter] = defaultdict(Counter)
    examples: dict[str, list[str]] = defaultdict(list)
    chosen = {k: v for k, v in ALL_STRATEGIES.items() if not only or k in only}
    total_weight = sum(WEIGHTS.get(name, 1.0) for name in chosen)
    for name, strategy in chosen.items():
        per = max(round(cases * WEIGHTS.get(name, 1.0) / total_weight), 1)
        run_boundary(name, strategy, per, seed_value, seconds, counts[name], examples[name])
    return counts, examples


def run_boundary(name, strategy, per: int, seed_value: int, seconds: float, counts: Counter, examples: list) -> None:
    """Run ``per`` cases of one boundary, counting outcomes and keeping the failing command lines."""

    @seed(seed_value)
    @settings(
        max_examples=per, deadline=None, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
    )
    @given(case=strategy)
    def one(case: Case) -> None:
        with tempfile.TemporaryDirectory(prefix="infercast-fuzz-") as folder:
            outcome = run_case(case, Path(folder), seconds)
        counts[outcome.kind] += 1
        if outcome.kind != "ok":
            last = (outcome.stderr.strip().splitlines() or [""])[-1][:240]
            examples.append(f"[{outcome.kind}] infercast {' '.join(case.args)[:300]}\n      {outcome.detail or last}")

    start = time.perf_counter()
    one()
    done = sum(counts.values())
    print(
        f"{name:14s} {done:5d} cases in {time.perf_counter() - start:6.1f} s: "
        + ", ".join(f"{k} {counts[k]}" for k in OUTCOMES if counts[k]),
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=3200, help="total generated cases (split over boundaries)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (same seed, same cases)")
    parser.add_argument("--seconds", type=float, default=30.0, help="per-case limit before it counts as a hang")
    parser.add_argument("--show", type=int, default=3, help="failing cases to print per boundary")
    parser.add_argument("--only", default="", help=f"comma-separated boundaries (of: {', '.join(ALL_STRATEGIES)})")
    opts = parser.parse_args()
    only = [name.strip() for name in opts.only.split(",") if name.strip()]
    unknown = sorted(set(only) - set(ALL_STRATEGIES))
    if unknown:
        parser.error(f"unknown boundaries {', '.join(unknown)}; known: {', '.join(ALL_STRATEGIES)}")
    start = time.perf_counter()
    counts, examples = campaign(opts.cases, opts.seed, opts.seconds, only)
    total = sum((c for c in counts.values()), Counter())
    n = sum(total.values())
    print(
        f"\n{n} cases in {time.perf_counter() - start:.0f} s (seed {opts.seed}): "
        f"tracebacks {total['traceback']}, hangs {total['hang']}, silent wrong answers {total['wrong']}, "
        f"malformed errors {total['bad_error']}, ok {total['ok']}"
    )
    for name, lines in examples.items():
        for line in lines[: opts.show]:
            print(f"  {name}: {line}")
    return 0 if total["ok"] == n else 1


if __name__ == "__main__":
    sys.exit(main())
