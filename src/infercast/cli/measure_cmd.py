"""`infercast measure`: time a random-weight PyTorch build of a model and write measurement records (CSV).

PyTorch is imported only when the command runs, so the rest of the CLI works without it. The same function
serves ``python -m infercast.harness run`` (:mod:`infercast.harness.__main__`), so both front ends parse lists
alike, share :class:`~infercast.harness.options.MeasureOptions`' defaults and print results the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from infercast.cli.common import JSON_HELP, console, emit_json, err_console, parse_int_list
from infercast.errors import InfercastError
from infercast.harness.options import DEFAULTS, MeasureOptions, MeasureResult


def _layer_pair(text: str | None) -> tuple[int, int] | None:
    values = parse_int_list("extrapolate-from", text)
    if values is None:
        return None
    if len(values) != 2:
        raise InfercastError(f"needs exactly two layer counts 'A,B', got {text!r}", field="extrapolate-from")
    return values[0], values[1]


def measure(
    model: Annotated[str, typer.Option(help="Catalog id or config.json path.")],
    gpu: Annotated[
        str | None,
        typer.Option(
            help="Hardware id for the records' gpu column (default: detected from the device name). "
            "CPU runs are always labelled 'cpu'."
        ),
    ] = DEFAULTS.gpu,
    precision: Annotated[
        str, typer.Option(help="bf16, fp16, fp32 or fp8 (fp8 needs compute capability >= 8.9).")
    ] = DEFAULTS.precision,
    layers: Annotated[int | None, typer.Option(help="Run only the first N decoder layers.")] = DEFAULTS.layers,
    prefill_lens: Annotated[str | None, typer.Option(help="Prompt lengths, e.g. 128,512,2048 or 128:2048:128.")] = None,
    batches: Annotated[str | None, typer.Option(help="Batch sizes, e.g. 1,8,32 or 1:4.")] = None,
    contexts: Annotated[str | None, typer.Option(help="Decode context lengths, e.g. 512,2048.")] = None,
    suite: Annotated[
        str,
        typer.Option(
            help="quick: prefill (batch 1), decode, TTFT/TPOT; full: quick with "
            "prefill batches plus micro; micro: GEMMs, attention, copy, launch."
        ),
    ] = DEFAULTS.suite,
    device: Annotated[str | None, typer.Option(help="cuda or cpu (default: cuda when available).")] = DEFAULTS.device,
    out: Annotated[
        Path | None, typer.Option(help="CSV to write (default: infercast-measure-MODEL-GPU-SUITE.csv).")
    ] = DEFAULTS.out,
    output_len: Annotated[
        int | None, typer.Option(help="Tokens generated per request for TTFT/TPOT (at least 2).")
    ] = DEFAULTS.output_len,
    repeats: Annotated[int | None, typer.Option(help="Timed repeats per point (median reported).")] = DEFAULTS.repeats,
    warmup: Annotated[int | None, typer.Option(help="Untimed warm-up calls per point.")] = DEFAULTS.warmup,
    cuda_graphs: Annotated[
        bool, typer.Option("--cuda-graphs/--no-cuda-graphs", help="Capture decode steps in CUDA graphs (CUDA only).")
    ] = DEFAULTS.cuda_graphs,
    l2_flush: Annotated[
        bool,
        typer.Option(
            "--l2-flush/--no-l2-flush",
            help="Evict the GPU's L2 cache before every timed repeat, as in serving (CUDA only).",
        ),
    ] = DEFAULTS.flush_l2,
    extrapolate_from: Annotated[
        str | None,
        typer.Option(
            help="Two layer counts 'A,B': measure both and predict the full model (written to FILE.extrapolated.csv)."
        ),
    ] = None,
    max_prefill_tokens: Annotated[
        int, typer.Option(help="Skip prefill points with batch x length above this.")
    ] = DEFAULTS.max_prefill_tokens,
    seed: Annotated[int, typer.Option(help="Seed of the random weights and tokens.")] = DEFAULTS.seed,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Measure prefill/decode step times, TTFT/TPOT and microbenchmarks of a model with random weights."""
    run_measure, command_line = _harness()
    opts = MeasureOptions(
        model=model,
        gpu=gpu,
        precision=precision,
        layers=layers,
        prefill_lens=parse_int_list("prefill-lens", prefill_lens),
        batches=parse_int_list("batches", batches),
        contexts=parse_int_list("contexts", contexts),
        suite=suite,
        device=device,
        out=out,
        output_len=output_len,
        warmup=warmup,
        repeats=repeats,
        cuda_graphs=cuda_graphs,
        flush_l2=l2_flush,
        extrapolate_from=_layer_pair(extrapolate_from),
        max_prefill_tokens=max_prefill_tokens,
        seed=seed,
        source=command_line(),
    )
    report(run_measure(opts), json_out)


def _harness() -> tuple[Callable[[MeasureOptions], MeasureResult], Callable[[], str]]:
    """The torch harness's runner and its command-line stamp, imported only when a run starts: without PyTorch,
    one line saying how to install it."""
    try:
        from infercast.harness.runner import run_measure
        from infercast.harness.timing import command_line
    except ImportError as exc:
        raise InfercastError(
            f"needs PyTorch ({exc}); install it with: pip install 'infercast[measure]'", field="measure"
        ) from None
    return run_measure, command_line


def report(result: MeasureResult, json_out: bool) -> None:
    """Print what a run measured (JSON, or skipped points on stderr and a table) and where it was written."""
    if json_out:
        emit_json(result.to_dict())
        return
    for line in result.skipped:
        err_console.print(f"[yellow]skipped[/] {line}")
    console.print(_table(result.records + result.extrapolated))
    console.print(f"timing: {result.timing}")
    if result.out:
        console.print(f"wrote {len(result.records)} records to {result.out}")
    if result.extrapolated_out:
        console.print(f"wrote {len(result.extrapolated)} extrapolated records to {result.extrapolated_out}")


def _table(records: list) -> Table:
    table = Table(title="measurements (torch harness, random weights)")
    for col in ("kind", "op", "batch", "input", "output", "context", "layers", "m x n x k", "value", "notes"):
        table.add_column(col, justify="right" if col not in ("kind", "op", "notes") else "left")
    for r in records:
        shape = f"{r.m}x{r.n}x{r.k}" if r.kind == "gemm" else ""
        table.add_row(
            r.kind,
            r.op,
            str(r.batch),
            str(r.input_len),
            str(r.output_len),
            str(r.context),
            str(r.layers),
            shape,
            f"{r.value_si * 1e3:.4g} ms",
            r.notes,
        )
    return table
