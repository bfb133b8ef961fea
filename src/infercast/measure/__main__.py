"""``python -m infercast.measure``: the measurement harness without the full CLI's dependencies (typer, rich).

Meant for GPU boxes that run from source (``PYTHONPATH=src``) with only torch, pydantic and PyYAML installed::

    python -m infercast.measure run --model llama-3.1-8b --suite full --out data/measurements/h100-sxm/x.csv
    python -m infercast.measure compare PREDICTED.csv MEASURED.csv

``run`` takes the same options as ``infercast measure``; user errors print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from infercast.errors import InfercastError


def _ints(text: str) -> list[int]:
    try:
        values = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _pair(text: str) -> tuple[int, int]:
    values = _ints(text)
    if len(values) != 2:
        raise argparse.ArgumentTypeError(f"expected two layer counts 'A,B', got {text!r}")
    return values[0], values[1]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m infercast.measure", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="measure a model (see `infercast measure --help`)")
    run.add_argument("--model", required=True)
    run.add_argument("--gpu")
    run.add_argument("--precision", default="bf16")
    run.add_argument("--layers", type=int)
    run.add_argument("--prefill-lens", type=_ints)
    run.add_argument("--batches", type=_ints)
    run.add_argument("--contexts", type=_ints)
    run.add_argument("--suite", default="quick")
    run.add_argument("--device")
    run.add_argument("--out", type=Path)
    run.add_argument("--output-len", type=int)
    run.add_argument("--repeats", type=int)
    run.add_argument("--warmup", type=int)
    run.add_argument("--no-cuda-graphs", dest="cuda_graphs", action="store_false")
    run.add_argument("--extrapolate-from", type=_pair)
    run.add_argument("--max-prefill-tokens", type=int, default=16384)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--json", action="store_true")
    cmp = sub.add_parser("compare", help="relative error of predicted (e.g. extrapolated) rows vs measured rows")
    cmp.add_argument("predicted", type=Path)
    cmp.add_argument("measured", type=Path)
    cmp.add_argument("--json", action="store_true")
    return parser


def _run(args: argparse.Namespace) -> None:
    from infercast.measure.runner import MeasureOptions, run_measure
    from infercast.measure.timing import command_line

    fields = {k: v for k, v in vars(args).items() if k not in ("command", "json")}
    result = run_measure(MeasureOptions(**fields, source=command_line()))
    if args.json:
        print(
            json.dumps(
                {
                    "out": str(result.out),
                    "skipped": result.skipped,
                    "records": [asdict(r) for r in result.records],
                    "extrapolated": [asdict(r) for r in result.extrapolated],
                },
                indent=2,
            )
        )
        return
    for line in result.skipped:
        print(f"skipped: {line}", file=sys.stderr)
    for r in result.records + result.extrapolated:
        shape = f"m={r.m} n={r.n} k={r.k}" if r.kind == "gemm" else f"b={r.batch} in={r.input_len} ctx={r.context}"
        print(f"{r.kind:16} {r.op:18} {shape:28} layers={r.layers:<3} {r.value_si * 1e3:10.4f} ms  {r.notes}")
    print(f"wrote {len(result.records)} records to {result.out}")
    if result.extrapolated_out:
        print(f"wrote {len(result.extrapolated)} extrapolated records to {result.extrapolated_out}")


def _compare(args: argparse.Namespace) -> None:
    from infercast.measure.records import read_records
    from infercast.measure.runner import compare_records

    rows = compare_records(read_records(args.predicted), read_records(args.measured))
    if not rows:
        raise InfercastError("no predicted row matches a measured row (same kind and shape)", field="compare")
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{'kind':12} {'batch':>5} {'input':>6} {'output':>6} {'context':>7} {'predicted ms':>13} "
        f"{'measured ms':>12} {'error %':>8}"
    )
    for r in rows:
        print(
            f"{r['kind']:12} {r['batch']:>5} {r['input_len']:>6} {r['output_len']:>6} {r['context']:>7} "
            f"{r['predicted_s'] * 1e3:13.4f} {r['measured_s'] * 1e3:12.4f} {r['error_pct']:8.2f}"
        )


def main(argv: list[str] | None = None) -> None:
    """Parse, dispatch, and turn user errors into one line on stderr with exit status 2."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            _run(args)
        else:
            _compare(args)
    except InfercastError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
