"""`infercast sweep`: the cartesian product of scenarios, vectorised, as a table or CSV/Parquet/JSON file."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from infercast.analysis.scenario import TTFT_DEFINITION
from infercast.cli.common import JSON_HELP, console, emit_json, parse_int_list, wrote
from infercast.cli.launch_opts import LaunchOption, launch_knobs
from infercast.display import fmt_time
from infercast.errors import InfercastError
from infercast.files import atomic_path, check_output_file

OUT_FORMATS = (".csv", ".parquet", ".json")
"""Extensions ``--out`` writes: CSV, Parquet (needs pyarrow) or JSON (one record per row)."""

if TYPE_CHECKING:
    import pandas as pd


_VARYING = (("kv_precision", "kv"), ("engine", "engine"), ("ep", "ep"), ("pp", "pp"), ("attention_dp", "attn-dp"))
"""Sweep columns the table shows only when they vary (column, header)."""


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def check_out_path(out: Path) -> None:
    """Refuse an ``--out`` path with an unknown extension or an unusable folder before anything is computed."""
    check_output_file(out, "out", OUT_FORMATS)


def write_rows(df: pd.DataFrame, out: Path) -> None:
    """Write every row of a sweep to ``out`` (atomically) in the format its extension names (:data:`OUT_FORMATS`)."""
    suffix = out.suffix.lower()
    try:
        with atomic_path(out, "out") as tmp:
            if suffix == ".parquet":
                df.to_parquet(tmp, index=False)
            elif suffix == ".json":
                df.to_json(tmp, orient="records", indent=1)
            else:
                df.to_csv(tmp, index=False)
    except ImportError:
        msg = "writing .parquet needs pyarrow (pip install pyarrow); use .csv or .json"
        raise InfercastError(msg, field="out") from None
    except OSError as exc:
        raise InfercastError(f"cannot write {str(out)!r}: {exc.strerror or exc}", field="out") from None


def _table(df: pd.DataFrame, out: Path | None) -> Table:
    """The best 30 rows (runnable first, then by throughput), with a column for every choice that varies."""
    t = Table(
        title=f"{len(df):,} configurations" + (f" (written to {out})" if out else ""),
        caption="TTFT, TPOT: means over each static batch's requests, as simulate --offline reports them "
        "(the last request's: ttft_last_s, tpot_last_s in --json / --out)",
    )
    # every choice that varies gets a column, so that no two rows look the same
    extra = [(c, h) for c, h in _VARYING if df[c].nunique() > 1]
    heads = ["model", "gpu", "precision", *(h for _, h in extra), "tp", "batch", "in", "out"]
    for col in (*heads, "TTFT mean", "TPOT mean", "out tok/s", "fits"):
        t.add_column(col, overflow="fold")
    # best first: configurations that fit (memory and context) ahead of any that do not, then by throughput
    runnable = df["fits"] & df["within_context"]
    order = df.assign(_runnable=runnable).sort_values(["_runnable", "output_throughput_tok_s"], ascending=False)
    shown = order.head(30) if len(df) > 30 else order
    for r in shown.to_dict(orient="records"):
        t.add_row(
            str(r["model"]),
            str(r["gpu"]),
            str(r["precision"]),
            *(str(r[c]) for c, _ in extra),
            str(r["tp"]),
            str(r["batch"]),
            str(r["input_len"]),
            str(r["output_len"]),
            fmt_time(r["ttft_s"]),
            fmt_time(r["tpot_s"]),
            f"{r['output_throughput_tok_s']:,.0f}",
            "yes" if r["fits"] else "no",
        )
    return t


@dataclass(frozen=True)
class SweepGrid:
    """The lists ``sweep`` takes the cartesian product of, parsed once from the command's flags."""

    models: list[str]
    gpus: list[str]
    precisions: list[str] | None
    kv_precisions: list[str] | None
    batches: list[int]
    input_lens: list[int]
    output_lens: list[int]
    tps: list[int]
    eps: list[int]
    engines: list[str]
    pps: list[int]
    attention_dps: list[int]

    @classmethod
    def parse(
        cls,
        *,
        models: str,
        gpus: str,
        precisions: str | None,
        kv_precisions: str | None,
        batches: str,
        input_lens: str,
        output_lens: str,
        tps: str,
        eps: str,
        engines: str,
        pps: str,
        attention_dps: str,
    ) -> SweepGrid:
        """The grid of the flags' comma-separated texts (a bad list is a one-line error naming its option)."""
        return cls(
            models=_names(models),
            gpus=_names(gpus),
            precisions=_names(precisions) if precisions else None,
            kv_precisions=_names(kv_precisions) if kv_precisions else None,
            batches=parse_int_list("batches", batches),
            input_lens=parse_int_list("input_lens", input_lens),
            output_lens=parse_int_list("output_lens", output_lens),
            tps=parse_int_list("tps", tps),
            eps=parse_int_list("eps", eps),
            engines=_names(engines),
            pps=parse_int_list("pps", pps),
            attention_dps=parse_int_list("attention_dps", attention_dps),
        )

    def run(self) -> pd.DataFrame:
        """Every combination, one row each (:func:`infercast.analysis.sweep.sweep`)."""
        from infercast.analysis.sweep import sweep as run_sweep

        return run_sweep(
            models=self.models,
            gpus=self.gpus,
            precisions=self.precisions,
            kv_precisions=self.kv_precisions,
            batches=self.batches,
            input_lens=self.input_lens,
            output_lens=self.output_lens,
            tps=self.tps,
            eps=self.eps,
            engines=self.engines,
            pps=self.pps,
            attention_dps=self.attention_dps,
        )


def sweep(
    models: Annotated[str, typer.Option(help="Comma-separated model ids.")] = "llama-3.1-8b",
    gpus: Annotated[str, typer.Option(help="Comma-separated accelerator ids.")] = "h100-sxm",
    precisions: Annotated[str | None, typer.Option(help="Comma-separated schemes (default: each model's).")] = None,
    kv_precisions: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated KV-cache formats (bf16, fp16, fp8, int8). Default as predict's --kv-precision: the "
            "checkpoint's, else fp8 where the engine serves the precision's checkpoints with an 8-bit cache "
            "(fp8 on trtllm, nvfp4), else the model dtype."
        ),
    ] = None,
    batches: Annotated[str, typer.Option(help="Batch sizes: 1,8,64 or 1:256:1.")] = "1,8,32,128",
    input_lens: Annotated[str, typer.Option(help="Prompt lengths.")] = "512,2048,8192",
    output_lens: Annotated[str, typer.Option(help="Output lengths.")] = "128,512",
    tps: Annotated[str, typer.Option(help="Tensor-parallel sizes.")] = "1",
    eps: Annotated[str, typer.Option(help="Expert-parallel sizes (MoE; each must divide tp x attention-dp).")] = "1",
    pps: Annotated[str, typer.Option(help="Pipeline-stage counts.")] = "1",
    attention_dps: Annotated[
        str, typer.Option("--attention-dps", help="Attention data-parallel sizes (MoE wide EP).")
    ] = "1",
    engines: Annotated[str, typer.Option(help="Engine profiles.")] = "vllm",
    out: Annotated[Path | None, typer.Option(help="Write all rows to FILE.csv, .parquet or .json.")] = None,
    launch: LaunchOption = None,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Evaluate every combination (static batches) with NumPy; prints the best and worst rows."""
    if out is not None:
        check_out_path(out)
    fixed = launch_knobs(launch, "sweep", limits=False) if launch is not None else {}
    grid = SweepGrid.parse(
        models=models,
        gpus=gpus,
        precisions=precisions,
        kv_precisions=kv_precisions,
        batches=batches,
        input_lens=input_lens,
        output_lens=output_lens,
        tps=tps,
        eps=eps,
        engines=engines,
        pps=pps,
        attention_dps=attention_dps,
    )
    df = replace(grid, **fixed).run()  # a --launch fixes the engine, TP and KV format it names
    # one output token has no gap between tokens: TPOT is undefined (null / '-'), as the simulator reports it
    df["tpot_s"] = df["tpot_s"].where(df["output_len"] > 1)
    if out is not None:
        write_rows(df, out)
        wrote(out, f"{len(df):,} rows")
    if json_out:
        emit_json(
            {
                "rows": df.astype({c: str for c in df.select_dtypes("category")}).to_dict(orient="records"),
                "skipped": df.attrs.get("skipped", []),
                "ttft_definition": TTFT_DEFINITION,
            }
        )
        return
    console.print(_table(df, out))
    for s in df.attrs.get("skipped", []):
        console.print(f"[yellow]skipped[/] {s['model']} {s['gpu']} {s['precision']}: {s['reason']}")
