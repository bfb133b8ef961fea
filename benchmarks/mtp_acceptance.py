"""Fit the per-token MTP acceptance of the public sweeps' TensorRT-LLM DeepSeek-R1 runs that drafted with MTP.

Usage:  python benchmarks/mtp_acceptance.py [--workers 2] [--write]

The dated silicon rows whose launch script drafted with MTP (``spec_tokens`` in
``records/data/sweep_launches.yaml``) do not report how many drafts were accepted. This scans one acceptance
(chance per draft token, given the ones before it) over a grid and keeps the one with the smallest median
|log(predicted / measured)| of mean TPOT; it also fits each GPU's rows from the others' and reports the left-out
errors. ``--write`` saves the value to ``src/infercast/records/data/mtp_acceptance.yaml``. About a minute on two
cores.
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

GRID = np.round(np.arange(0.40, 0.951, 0.05), 2)
"""Acceptances tried: below 0.4 MTP would not pay for its verify pass; DeepSeek-V3's report gives 0.85-0.9 for the
second token on its own text (technical report, section 5.4.3), an upper end for random-token prompts."""


def errors(records: Sequence[Record], acceptance: float, workers: int) -> dict[str, np.ndarray]:
    """log(predicted / measured) of each TPOT record at this acceptance, by GPU."""
    tried = [replace(r, spec_acceptance=float(acceptance)) for r in records]
    compared, _ = compare_each(tried, None, workers=workers)
    out: dict[str, list[float]] = {}
    for c in compared:
        out.setdefault(c.record.gpu, []).append(float(np.log(c.predicted / c.measured)))
    return {gpu: np.asarray(v) for gpu, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--write", action="store_true", help=f"save {ACCEPTANCE.relative_to(ROOT)}")
    args = parser.parse_args()
    records, version = held_out_records()
    mtp = [r for r in records if r.spec_tokens and r.kind == "serving_tpot"]
    table = {a: errors(mtp, a, args.workers) for a in GRID}

    def score(a: float, gpus: set[str]) -> float:
        return float(np.median(np.abs(np.concatenate([e for g, e in table[a].items() if g in gpus]))))

    gpus = sorted({r.gpu for r in mtp})
    best = min(GRID, key=lambda a: score(a, set(gpus)))
    lines = [
        f"{len(mtp)} TPOT points ({', '.join(gpus)}); acceptance {best:.3f}, median |log error| "
        f"{score(best, set(gpus)):.3f} (at 0.70: {score(0.70, set(gpus)):.3f})"
    ]
    for gpu in gpus:
        rest = set(gpus) - {gpu}
        fold = min(GRID, key=lambda a: score(a, rest)) if rest else best
        left = np.expm1(table[fold][gpu])
        lines.append(
            f"  {gpu} left out: fitted {fold:.3f} on the others; its median |error| "
            f"{100 * np.median(np.abs(left)):.1f} %, signed {100 * np.median(left):+.1f} %"
        )
    print("\n".join(lines))
    if args.write:
        head = ACCEPTANCE.read_text().split("\nacceptance:")[0]
        body = f"{head}\nacceptance: {best:.3f}\n# aiconfigurator-core {version}: " + "\n# ".join(lines) + "\n"
        atomic_write(ACCEPTANCE, "mtp_acceptance", lambda p: p.write_text(body))


if __name__ == "__main__":
    main()
