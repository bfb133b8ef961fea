"""Fit the per-token MTP acceptance of each model in the public sweeps' runs that drafted with its MTP head.

Usage:  python benchmarks/mtp_acceptance.py [--workers 2] [--write]

The dated silicon rows whose launch script drafted with MTP (``spec_tokens`` in
``records/data/sweep_launches.yaml``: TensorRT-LLM and SGLang DeepSeek-R1, SGLang Qwen3.5) do not report how many
drafts were accepted. For each model this scans one acceptance (chance per draft token, given the ones before it)
over a grid and keeps the one with the smallest median |log(predicted / measured)| of mean TPOT; it also fits each
GPU's rows from the others' (with one GPU, each prompt/output shape's rows from the others') and reports the
left-out errors.
``--write`` saves the values to ``src/infercast/records/data/mtp_acceptance.yaml``. About two minutes on two cores.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from silicon_groups import held_out_records  # noqa: E402

from infercast.calibrate.validation import compare_each  # noqa: E402
from infercast.files import atomic_write  # noqa: E402
from infercast.records.record import Record  # noqa: E402
from infercast.records.sweep_launches import ACCEPTANCE  # noqa: E402

GRID = np.round(np.arange(0.20, 0.951, 0.05), 2)
"""Acceptances tried: from a draft the target rejects four times in five (MTP then barely pays for its verify pass)
to DeepSeek-V3's 0.85-0.9 for the second token on its own text (technical report, section 5.4.3), an upper end
for random-token prompts."""


def errors(records: Sequence[Record], acceptance: float, workers: int) -> dict[str, np.ndarray]:
    """log(predicted / measured) of each TPOT record at this acceptance, by fold (GPU, or shape on one GPU)."""
    tried = [replace(r, spec_acceptance=float(acceptance)) for r in records]
    compared, _ = compare_each(tried, None, workers=workers)
    by_gpu = len({r.gpu for r in records}) > 1
    out: dict[str, list[float]] = {}
    for c in compared:
        fold = c.record.gpu if by_gpu else f"{c.record.input_len}/{c.record.output_len}"
        out.setdefault(fold, []).append(float(np.log(c.predicted / c.measured)))
    return {fold: np.asarray(v) for fold, v in out.items()}


def fit_model(model: str, records: Sequence[Record], workers: int) -> tuple[float, list[str]]:
    """One model's acceptance and its report lines (in-sample and each fold left out)."""
    table = {a: errors(records, a, workers) for a in GRID}
    folds = sorted(table[GRID[0]])

    def score(a: float, keep: set[str]) -> float:
        return float(np.median(np.abs(np.concatenate([e for f, e in table[a].items() if f in keep]))))

    best = min(GRID, key=lambda a: score(a, set(folds)))
    kind = "GPU" if "/" not in folds[0] else "prompt/output shape"
    lines = [
        f"{model}: {len(records)} TPOT points ({', '.join(folds)}); acceptance {best:.3f}, median |log error| "
        f"{score(best, set(folds)):.3f} (at 0.70: {score(0.70, set(folds)):.3f}); left out by {kind}:"
    ]
    for fold in folds:
        rest = set(folds) - {fold}
        chosen = min(GRID, key=lambda a: score(a, rest)) if rest else best
        left = np.expm1(table[chosen][fold])
        lines.append(
            f"  {fold} left out: fitted {chosen:.3f} on the others; its median |error| "
            f"{100 * np.median(np.abs(left)):.1f} %, signed {100 * np.median(left):+.1f} %"
        )
    return float(best), lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--write", action="store_true", help=f"save {ACCEPTANCE.relative_to(ROOT)}")
    args = parser.parse_args()
    records, version = held_out_records()
    mtp = [r for r in records if r.spec_tokens and r.kind == "serving_tpot"]
    fitted: dict[str, float] = {}
    lines: list[str] = []
    for model in sorted({r.model for r in mtp}):
        fitted[model], report = fit_model(model, [r for r in mtp if r.model == model], args.workers)
        lines += report
    print("\n".join(lines))
    if args.write:
        head = ACCEPTANCE.read_text().split("\nacceptance:")[0]
        values = "".join(f"  {model}: {value:.3f}\n" for model, value in fitted.items())
        body = f"{head}\nacceptance:\n{values}# aiconfigurator-core {version}:\n# " + "\n# ".join(lines) + "\n"
        atomic_write(ACCEPTANCE, "mtp_acceptance", lambda p: p.write_text(body))


if __name__ == "__main__":
    main()
