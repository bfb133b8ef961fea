"""Fit vLLM 0.14's per-token all-reduce time on the public silicon rows, left out by model and by GPU.

Usage:  python benchmarks/allreduce_token_fit.py [--workers 2] [--write]

vLLM 0.14's runs at TP >= 2 take longer per prompt than every kernel its tables time (8k prompts: 15-60 ms at
TP 2-8 on H100, H200, B200 and B300 alike, about nothing at TP 1; ``docs/accuracy-notes.md``), roughly in proportion
to tokens x layers and not to the hidden size. ``allreduce_token_s`` prices that as seconds per token per
all-reduce call (``cost/profile.py``). This scans it over :data:`GRID` on the engine's held-out rows and keeps the
value with the smallest median |log(predicted / measured)| over their mean TTFT and TPOT together; it then fits it
again with each model's rows left out (and each GPU's), predicts the left-out rows with that value and reports
their errors, alone and within the whole set (the other engines' points as ``benchmarks/silicon_groups.py``
predicts them). ``--write`` saves ``src/infercast/cost/profiles/silicon_fit.yaml``. About three minutes on two cores.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from silicon_groups import held_out_records  # noqa: E402

from infercast.calibrate.validation import Comparison, compare_each  # noqa: E402
from infercast.cost.profile import CostProfile, load_profile  # noqa: E402
from infercast.files import atomic_write  # noqa: E402
from infercast.records.record import Record  # noqa: E402
from infercast.specs.catalog import get_hardware  # noqa: E402

ENGINE = "vllm-0.14"
PARAMETER = "allreduce_token_s"
GRID = np.round(np.arange(0.0, 60.1e-9, 5e-9), 12)
"""Seconds per token per all-reduce call: from none to 60 ns (at 60 ns an 8k prompt on gpt-oss-120b's 73 calls
gains 36 ms, more than any run's gap)."""
OUT = ROOT / "src" / "infercast" / "cost" / "profiles" / "silicon_fit.yaml"
HEADER = (
    "# Engine-release parameters fitted on aiconfigurator-core's public silicon rows (systems/silicon_sample.csv)\n"
    "# by `python benchmarks/allreduce_token_fit.py --write` (do not edit by hand). allreduce_token_s: seconds per\n"
    "# token per tensor-parallel all-reduce call beyond the collectives' measured curves (cost/profile.py). report:\n"
    "# median / mean |error| in sample and with each model (GPU) left out, fitted on the other groups' rows.\n"
)
FOLDS = {"model": lambda r: r.model, "GPU": lambda r: r.gpu}


def profiles(records: Sequence[Record], seconds: float) -> dict[str, CostProfile]:
    """The installed profiles of the engine on each GPU of ``records``, with the parameter at ``seconds``."""
    out = {}
    for gpu in sorted({r.gpu for r in records}):
        hw = get_hardware(gpu)
        base = load_profile(hw.id, hw.architecture, ENGINE)
        out[f"{gpu}/{ENGINE}"] = base.with_values({PARAMETER: float(seconds)}, "grid point")
    return out


def log_errors(compared: Sequence[Comparison]) -> np.ndarray:
    return np.log([c.predicted / c.measured for c in compared])


def score(compared: Sequence[Comparison], keep: np.ndarray) -> float:
    """The objective: median |log error| of the kept points (TTFT and TPOT together)."""
    return float(np.median(np.abs(log_errors(compared)[keep])))


def figures(errors: np.ndarray, metric: np.ndarray) -> str:
    """'TTFT median / mean, TPOT median / mean' of relative errors."""
    parts = []
    for m in ("ttft", "tpot"):
        a = np.abs(errors[metric == m])
        parts.append(f"{m.upper()} {100 * np.median(a):.1f} / {100 * a.mean():.1f} %")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--write", action="store_true", help=f"save {OUT.relative_to(ROOT)}")
    args = parser.parse_args()
    records, version = held_out_records()
    mine = [r for r in records if r.engine == ENGINE]
    others, _ = compare_each([r for r in records if r.engine != ENGINE], None, workers=args.workers)
    table = {float(s): compare_each(mine, profiles(mine, s), workers=args.workers)[0] for s in GRID}
    first = table[float(GRID[0])]
    metric = np.array([c.record.kind.removeprefix("serving_") for c in first])
    every = np.ones(len(first), dtype=bool)
    best = min(table, key=lambda s: score(table[s], every))
    rel = {s: np.array([c.error for c in table[s]]) for s in table}
    rest = np.array([c.error for c in others])
    rest_metric = np.array([c.record.kind.removeprefix("serving_") for c in others])
    lines = [
        f"{ENGINE}: {len(first)} points ({len({c.record.gpu for c in first})} GPUs, "
        f"{len({c.record.model for c in first})} models); {PARAMETER} {best * 1e9:.0f} ns, median |log error| "
        f"{score(table[best], every):.3f} (at 0: {score(first, every):.3f})",
        f"  in sample: {figures(rel[best], metric)} (at 0: {figures(rel[0.0], metric)}); whole set "
        f"{figures(np.concatenate([rest, rel[best]]), np.concatenate([rest_metric, metric]))}",
    ]
    for name, key in FOLDS.items():
        groups = np.array([key(c.record) for c in first])
        left = np.empty(len(first))
        chosen = []
        for g in sorted(set(groups)):
            out = groups == g
            s = min(table, key=lambda s: score(table[s], ~out))
            left[out] = rel[s][out]
            chosen.append(f"{g} {s * 1e9:.0f}")
        whole = figures(np.concatenate([rest, left]), np.concatenate([rest_metric, metric]))
        lines.append(f"  each {name} left out ({', '.join(chosen)} ns): {figures(left, metric)}; whole set {whole}")
    print("\n".join(lines))
    if args.write:
        data = {
            "fitted_from": f"aiconfigurator-core {version} systems/silicon_sample.csv ({Path(__file__).name})",
            "engines": {ENGINE: {PARAMETER: float(f"{best:.3e}")}},
            "report": lines,
        }
        body = HEADER + yaml.safe_dump(data, sort_keys=False, width=1000)
        atomic_write(OUT, "silicon_fit", lambda p: p.write_text(body))


if __name__ == "__main__":
    main()
