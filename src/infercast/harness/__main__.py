"""``python -m infercast.harness``: the measurement harness as a plain module entry point, for GPU boxes that run
from source (``PYTHONPATH=src``) without installing the package::

    python -m infercast.harness run --model llama-3.1-8b --suite full --out data/harness/h100-sxm/x.csv
    python -m infercast.harness compare PREDICTED.csv MEASURED.csv

``run`` is ``infercast measure`` itself (:func:`infercast.cli.measure_cmd.measure`): the same options, defaults
(:class:`~infercast.harness.options.MeasureOptions`), list syntax (``1,8,32`` or ``1:4``) and output. It needs
torch, pydantic, PyYAML and the CLI's own dependencies (typer, rich, numpy, scipy, pandas). User errors print
one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from infercast.errors import InfercastError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m infercast.harness", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run", help="measure a model (see `infercast measure --help`)", argument_default=argparse.SUPPRESS
    )
    run.add_argument("--model", required=True)
    for name in ("--gpu", "--precision", "--suite", "--device"):
        run.add_argument(name)
    for name in ("--prefill-lens", "--batches", "--contexts", "--extrapolate-from"):
        run.add_argument(name, help="comma-separated integers or start:stop[:step] ranges")
    for name in ("--layers", "--output-len", "--repeats", "--warmup", "--max-prefill-tokens", "--seed"):
        run.add_argument(name, type=int)
    run.add_argument("--out", type=Path)
    run.add_argument("--no-cuda-graphs", dest="cuda_graphs", action="store_false")
    run.add_argument("--no-l2-flush", dest="l2_flush", action="store_false")
    run.add_argument("--json", dest="json_out", action="store_true")
    cmp = sub.add_parser("compare", help="relative error of predicted (e.g. extrapolated) rows vs measured rows")
    cmp.add_argument("predicted", type=Path)
    cmp.add_argument("measured", type=Path)
    cmp.add_argument("--json", action="store_true")
    return parser


def _run(args: argparse.Namespace) -> None:
    from infercast.cli.measure_cmd import measure

    measure(**{k: v for k, v in vars(args).items() if k != "command"})


def _compare(args: argparse.Namespace) -> None:
    from infercast.harness.runner import compare_records
    from infercast.records.readers import read_records

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
