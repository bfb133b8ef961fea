"""Copy the accuracy headline from the generated benchmark tables into README.md and docs/accuracy.md.

The figures live in ``benchmarks/accuracy.md`` (cross-validated on the calibration set) and
``benchmarks/silicon_groups.md`` (the public silicon set; the two things fitted there report their left-out
figures, of which the headline quotes the per-release fit's by model). This script rewrites the text between
``<!-- accuracy-headline -->`` and ``<!-- /accuracy-headline -->`` in both pages, so no figure is typed by hand.
``--check`` exits 1 when a page is stale (tests/test_docs.py runs it).

    python scripts/sync_accuracy_docs.py [--check]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "README.md", ROOT / "docs" / "accuracy.md")
START, END = "<!-- accuracy-headline -->", "<!-- /accuracy-headline -->"


def _rows(path: Path) -> list[list[str]]:
    """Cells of every table row in a generated Markdown file."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            out.append([c.strip().replace(" %", "%") for c in line.strip("|").split("|")])
    return out


def _row(rows: list[list[str]], *first: str) -> list[str]:
    for r in rows:
        if tuple(r[: len(first)]) == first:
            return r
    raise SystemExit(f"no row {first} in the generated tables: re-run the benchmark scripts")


def _left_out_by_model() -> str:
    """The whole set's TTFT and TPOT, median / mean, with the per-release fit's value chosen without each model
    (``cost/profiles/silicon_fit.yaml``'s report, written by benchmarks/allreduce_token_fit.py)."""
    text = (ROOT / "src" / "infercast" / "cost" / "profiles" / "silicon_fit.yaml").read_text(encoding="utf-8")
    found = re.search(r"each model left out .*?whole set TTFT ([\d.]+) / ([\d.]+) %, TPOT ([\d.]+) / ([\d.]+) %", text)
    if not found:
        raise SystemExit("no left-out figures in silicon_fit.yaml: re-run benchmarks/allreduce_token_fit.py --write")
    a, b, c, d = found.groups()
    return f"TTFT {a}% / {b}%, TPOT {c}% / {d}%"


def headline() -> str:
    """The headline paragraph, from the generated tables."""
    acc = _rows(ROOT / "benchmarks" / "accuracy.md")
    sil = _rows(ROOT / "benchmarks" / "silicon_groups.md")
    tpot_in, ttft_in = _row(acc, "closed-loop tpot")[-1], _row(acc, "closed-loop ttft")[-1]
    ttft, tpot = _row(sil, "all", "ttft"), _row(sil, "all", "tpot")
    thr = _row(sil, "all", "throughput at top load")
    return (
        f"Cross-validated (leave one engine, TP or model out) on {_row(acc, 'closed-loop tpot')[1]} closed-loop "
        f"runs of vLLM, SGLang and TensorRT-LLM on H100, mean TPOT is off by {tpot_in.split(' / ')[0]} and mean "
        f"TTFT by {ttft_in.split(' / ')[0]} at the median. On {ttft[2]} points of the public silicon set (other "
        "GPUs, models and engine releases; fitted there only: two MTP acceptances and vLLM 0.14's all-reduce time "
        f"per token, left out by model: {_left_out_by_model()}) the median / mean errors are "
        f"{tpot[3]} / {tpot[4]} (TPOT) and {ttft[3]} / {ttft[4]} (TTFT), and {thr[3]} / {thr[4]} for throughput at "
        f"each sweep's highest load; {ttft[7]} TTFT and {tpot[7]} TPOT points are over-predicted more than 3x. "
        "Predictions there print that wider band, by engine and load (`benchmarks/accuracy.md`)."
    )


def _wrap(text: str, width: int = 116) -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join([*lines, line])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale; write nothing")
    args = parser.parse_args()
    block = f"{START}\n{_wrap(headline())}\n{END}"
    stale = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        if START not in text or END not in text:
            raise SystemExit(f"{page.relative_to(ROOT)} has no {START} ... {END} block")
        new = re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _: block, text, flags=re.S)
        if new != text:
            stale.append(str(page.relative_to(ROOT)))
            if not args.check:
                page.write_text(new, encoding="utf-8")
    if stale:
        print(("stale: " if args.check else "wrote: ") + ", ".join(stale))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
