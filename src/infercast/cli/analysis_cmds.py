"""`infercast compare`, `roofline`, `select`, `crossover`: GPU/precision comparisons built on `predict`.

Option names follow `infercast predict`; lists are comma-separated (``--gpus h100-sxm,h200``). Every
command has ``--json``. Errors are :class:`InfercastError` (one line, exit status 2 via ``cli.main``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import numpy as np
import typer
from rich.markup import escape
from rich.table import Table

from infercast.cli.common import JSON_HELP, KV_HELP, console, emit_json, parse_int_list
from infercast.display import fmt_time
from infercast.errors import InfercastError, parse_duration
from infercast.specs.engine import engine_label

if TYPE_CHECKING:
    import pandas as pd

PRECISIONS_HELP = "Comma-separated schemes, e.g. bf16,fp8,int4 (default: the model's; fp16 without bf16)."
MODEL_HELP = "Catalog id or config.json path."
ENGINE_HELP = (
    "Engine profile: vllm (vLLM 0.12), vllm-0.14 (async scheduling), sglang (SGLang 0.5), trtllm (TensorRT-LLM "
    "1.0), ideal (pure roofline)."
)
EP_HELP = "Expert-parallel ways (MoE; must divide tp)."


def parse_names(field: str, text: str | None) -> list[str] | None:
    """'h100-sxm, h200' -> ['h100-sxm', 'h200']; None stays None; an empty list is an error."""
    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise InfercastError(f"needs at least one comma-separated name, got {text!r}", field=field)
    return names


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-ready dicts (NaN becomes null in ``emit_json``)."""
    return [{k: (None if _missing(v) else v) for k, v in r.items()} for r in df.to_dict(orient="records")]


def _missing(value: object) -> bool:
    import pandas as pd  # loaded already: the values come from a DataFrame

    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _t(value: float) -> str:
    return "-" if _missing(value) else fmt_time(value)


def _x(value: float) -> str:
    return "-" if _missing(value) else f"{value:.2f}x"


def _usd(value: float) -> str:
    return "-" if _missing(value) else f"${value:,.2f}"


# --------------------------------------------------------------------------------------------- compare


def compare(
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "llama-3.1-8b",
    gpus: Annotated[str, typer.Option(help="Comma-separated accelerator ids.")] = "a100-80gb,h100-sxm,h200",
    precisions: Annotated[str | None, typer.Option(help=PRECISIONS_HELP)] = None,
    input_len: Annotated[int, typer.Option(help="Prompt tokens.")] = 2048,
    output_len: Annotated[int, typer.Option(help="Output tokens.")] = 256,
    batch: Annotated[int, typer.Option(help="Static batch size (requests run together).")] = 1,
    tp: Annotated[int, typer.Option(help="Tensor-parallel GPUs per replica.")] = 1,
    ep: Annotated[int, typer.Option(help=EP_HELP)] = 1,
    kv_precision: Annotated[str | None, typer.Option(help=KV_HELP)] = None,
    engine: Annotated[
        str, typer.Option(help=ENGINE_HELP + " Comma-separated to compare engines: vllm,sglang,trtllm.")
    ] = "vllm",
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Compare GPUs, precisions and engines on one scenario: TTFT tracks FLOP/s, TPOT tracks HBM bandwidth; says
    when a difference lies inside the error bands and which terms differ."""
    from infercast.analysis import compare as analysis

    df = analysis.compare(
        model,
        parse_names("gpus", gpus) or [],
        parse_names("precisions", precisions),
        input_len=input_len,
        output_len=output_len,
        batch=batch,
        tp=tp,
        ep=ep,
        kv_precision=kv_precision,
        engine=engine,
    )
    if json_out:
        emit_json({**df.attrs, "rows": _records(df)})
        return
    ok = df[df["ttft_s"].notna()]
    engines = df["engine"].nunique() > 1
    t = _compare_table(df, ok, engines)
    p = Table(title="Which ceiling each phase hits (achieved per GPU; x = ratio of the spec to the baseline's)")
    for col in ("GPU", "prec", "prefill", "TFLOP/s", "of peak", "peak x", "decode", "TB/s", "of HBM", "HBM x"):
        p.add_column(col, justify="left" if col in ("GPU", "prec", "prefill", "decode") else "right")
    for r in ok.itertuples(index=False):
        p.add_row(
            r.gpu,
            r.precision,
            f"{r.prefill_bound} (AI {r.prefill_ai:,.0f})",
            f"{r.prefill_tflops_per_gpu:,.0f}",
            f"{r.prefill_flops_util:.0%}",
            _x(r.peak_flops_ratio),
            f"{r.decode_bound} (AI {r.decode_ai:.3g})",
            f"{r.decode_tb_s_per_gpu:.2f}",
            f"{r.decode_bw_util:.0%}",
            _x(r.bandwidth_ratio),
        )
    if len(ok):
        console.print(t)
        console.print(p)
    for r in ok.iloc[1:].itertuples(index=False):
        console.print(_verdict(r, engines))
    for r in df[df["note"] != ""].itertuples(index=False):
        console.print(f"[yellow]note[/] {r.gpu} {r.precision}: {r.note}")


def _compare_table(df: pd.DataFrame, ok: pd.DataFrame, engines: bool) -> Table:
    """compare's main table: means with their bands, speedups marked ~ where inside the bands."""
    base = df.attrs.get("baseline", "-")
    a = df.attrs
    t = Table(
        title=f"{a['model']}: prompt {a['input_len']}, output {a['output_len']}, batch {a['batch']}, tp {a['tp']}"
        + (f", ep {a['ep']}" if a["ep"] > 1 else "")
        + f" ({', '.join(engine_label(e) for e in str(a['engine']).split(','))})",
        caption=f"TTFT, TPOT: means over the batch's requests (± the error band); speedup = {base} time / this "
        "time, ~ where the difference lies inside the two error bands; $/Mtok = replica $/h over output tokens/s",
    )
    heads = ("GPU", "prec", *(("engine",) if engines else ()), "TTFT mean", "TPOT mean", "E2E", "tok/s", "memory")
    for col in (*heads, "$/Mtok", "TTFT speedup", "TPOT speedup"):
        t.add_column(
            col, justify="left" if col in ("GPU", "prec", "engine", "memory") else "right", no_wrap=col == "memory"
        )
    for i, r in enumerate(ok.itertuples(index=False)):
        t.add_row(
            r.gpu,
            r.precision,
            *((r.engine,) if engines else ()),
            _t(r.ttft_s) + _band(r.ttft_error),
            _t(r.tpot_s) + _band(r.tpot_error),
            _t(r.e2e_s),
            f"{r.output_throughput_tok_s:,.1f}",
            ("fits " if r.fits else "[red]no fit[/] ") + f"{r.memory_bytes / 1e9:.1f}/{r.capacity_bytes / 1e9:.0f} GB",
            _usd(r.cost_per_mtok_usd),
            _x(r.ttft_speedup) + ("" if r.ttft_distinguishable or not i else " ~"),
            _x(r.tpot_speedup) + ("" if r.tpot_distinguishable or not i else " ~"),
        )
    return t


def _band(error: float) -> str:
    return "" if _missing(error) else f" ±{100 * error:.0f}%"


def _verdict(r: Any, engines: bool) -> str:
    """'h100-sxm bf16 sglang vs the baseline: TTFT +1.7 %, TPOT -2.8 %: not distinguishable (inside the error
    bands); differs in: ...' for one row of compare."""
    name = f"{r.gpu} {r.precision}" + (f" {r.engine}" if engines else "") + " against the baseline"
    moves = []
    for metric, speedup, seen in (
        ("TTFT", r.ttft_speedup, r.ttft_distinguishable),
        ("TPOT", r.tpot_speedup, r.tpot_distinguishable),
    ):
        change = 1 / speedup - 1
        moves.append(f"{metric} {change:+.1%}" + ("" if seen else " (not distinguishable: inside the error bands)"))
    why = f"; differs in: {r.differs_in}" if r.differs_in else ""
    return escape(f"{name}: " + ", ".join(moves) + why)


# --------------------------------------------------------------------------------------------- roofline


def roofline(
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "llama-3.1-8b",
    gpus: Annotated[str, typer.Option(help="Comma-separated accelerator ids (one roofline each).")] = "h100-sxm",
    precision: Annotated[
        str | None, typer.Option(help="Scheme for every GPU (default: the model's; fp16 without bf16).")
    ] = None,
    input_len: Annotated[int, typer.Option(help="Prompt tokens.")] = 2048,
    output_len: Annotated[int, typer.Option(help="Output tokens.")] = 256,
    batch: Annotated[int, typer.Option(help="Static batch size (requests run together).")] = 1,
    tp: Annotated[int, typer.Option(help="Tensor-parallel GPUs per replica.")] = 1,
    ep: Annotated[int, typer.Option(help=EP_HELP)] = 1,
    kv_precision: Annotated[str | None, typer.Option(help=KV_HELP)] = None,
    engine: Annotated[str, typer.Option(help=ENGINE_HELP)] = "vllm",
    out: Annotated[Path, typer.Option(help="Image to write: .png or .svg.")] = Path("roofline.png"),
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Draw each GPU's roofline with the prefill and decode points of the scenario (PNG or SVG)."""
    from infercast.analysis.roofline_plot import image_format, roofline_data, save_roofline

    image_format(out)  # checked before predicting anything
    data = roofline_data(
        parse_names("gpus", gpus) or [],
        model,
        input_len=input_len,
        output_len=output_len,
        batch=batch,
        precision=precision,
        tp=tp,
        ep=ep,
        kv_precision=kv_precision,
        engine=engine,
    )
    path = save_roofline(data, out)
    if json_out:
        emit_json({**data, "path": str(path)})
        return
    t = Table(title=f"Roofline points: {data['model']} (prompt {input_len}, output {output_len}, batch {batch})")
    for col in (
        "GPU",
        "prec",
        "peak TFLOP/s",
        "HBM TB/s",
        "ridge",
        "phase",
        "AI (FLOP/B)",
        "achieved TFLOP/s",
        "% of roof",
        "bound",
    ):
        t.add_column(col, justify="left" if col in ("GPU", "prec", "phase", "bound") else "right")
    entries = cast("list[dict[str, Any]]", data["gpus"])  # roofline_data's layout: one entry per GPU
    for e in entries:
        for phase, pt in e["points"].items():
            t.add_row(
                e["gpu"],
                e["precision"],
                f"{e['peak_flops'] / 1e12:,.0f}",
                f"{e['bandwidth_bytes_s'] / 1e12:.2f}",
                f"{e['ridge_point']:.0f}",
                phase,
                f"{pt['arithmetic_intensity']:,.0f}"
                if pt["arithmetic_intensity"] >= 10
                else f"{pt['arithmetic_intensity']:.3g}",
                f"{pt['achieved_flops_per_gpu'] / 1e12:,.2f}",
                f"{pt['achieved_flops_per_gpu'] / pt['attainable_flops_per_gpu']:.0%}",
                pt["bound"],
            )
    console.print(t)
    for s in cast("list[dict[str, str]]", data["skipped"]):
        console.print(f"[yellow]skipped[/] {s['gpu']}: {s['reason']}")
    console.print(f"wrote {path}")


# --------------------------------------------------------------------------------------------- select


def select(
    ttft: Annotated[str, typer.Option(help="TTFT target: 200ms, 0.2s, 500us (bare number = ms).")],
    tpot: Annotated[str, typer.Option(help="TPOT target: 50ms, 0.05s (bare number = ms).")],
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "llama-3.1-8b",
    gpus: Annotated[str | None, typer.Option(help="Comma-separated accelerator ids (default: all).")] = None,
    precisions: Annotated[str | None, typer.Option(help=PRECISIONS_HELP)] = None,
    input_len: Annotated[int, typer.Option(help="Prompt tokens.")] = 2048,
    output_len: Annotated[int, typer.Option(help="Output tokens.")] = 256,
    batch: Annotated[int, typer.Option(help="Static batch size (requests run together).")] = 1,
    tps: Annotated[str, typer.Option(help="Tensor-parallel sizes to try, e.g. 1,2,4,8.")] = "1,2,4,8",
    ep: Annotated[int, typer.Option(help=EP_HELP)] = 1,
    kv_precision: Annotated[str | None, typer.Option(help=KV_HELP)] = None,
    engine: Annotated[str, typer.Option(help=ENGINE_HELP)] = "vllm",
    all_configs: Annotated[
        bool, typer.Option("--all", help="List every GPU x precision x TP instead of the best per GPU.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Which GPUs meet a TTFT/TPOT SLA for a static batch (the planner's analytic screen); under traffic, with
    percentiles and a fleet size: `infercast plan`."""
    import pandas as pd

    from infercast.plan.screen import ScreenLayout, ScreenQuery
    from infercast.plan.select import select as plan_select

    ttft_s = parse_duration("ttft", ttft)
    tpot_s = parse_duration("tpot", tpot)
    df = plan_select(
        model,
        parse_names("gpus", gpus),
        query=ScreenQuery(ttft_s, tpot_s, input_len, output_len, batch),
        precisions=parse_names("precisions", precisions),
        tps=parse_int_list("tps", tps) or [],
        layout=ScreenLayout(ep=ep, kv_precision=kv_precision, engine=engine),
        all_configs=all_configs,
    )
    if json_out:
        emit_json({**df.attrs, "passing": df.loc[df["passes"], "gpu"].unique().tolist(), "rows": _records(df)})
        return
    n_pass = int(df["passes"].sum())
    t = Table(
        title=f"SLA TTFT <= {fmt_time(ttft_s)}, TPOT <= {fmt_time(tpot_s)}: {df.attrs['model']}, prompt "
        f"{input_len}, output {output_len}, batch {batch}",
        caption=f"{n_pass} of {len(df)} {'configurations' if all_configs else 'GPUs'} pass; "
        "$/Mtok = replica $/h over output tokens/s; TTFT, TPOT: the batch's last request's (predict's ttft_last_s, "
        "tpot_last_s). A static batch alone, no queueing: for traffic, tail "
        f"percentiles and fleet size run `infercast plan --slo ttft:p99:{ttft} tpot:p90:{tpot} --rate R`",
    )
    for col in ("GPU", "verdict", "tp", "prec", "TTFT", "TPOT", "tok/s", "$/Mtok", "reason"):
        t.add_column(col, justify="left" if col in ("GPU", "verdict", "prec", "reason") else "right")
    for r in df.itertuples(index=False):
        t.add_row(
            r.gpu,
            "[green]PASS[/]" if r.passes else "[red]FAIL[/]",
            "-" if _missing(r.tp) else str(r.tp),
            r.precision,
            _t(r.ttft_s),
            _t(r.tpot_s),
            "-" if pd.isna(r.output_throughput_tok_s) else f"{r.output_throughput_tok_s:,.1f}",
            _usd(r.cost_per_mtok_usd),
            r.reason,
        )
    console.print(t)


# --------------------------------------------------------------------------------------------- crossover


def crossover(
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "llama-3.1-8b",
    gpu: Annotated[str, typer.Option(help="Accelerator id or hardware YAML file.")] = "h100-sxm",
    output_len: Annotated[int, typer.Option(help="Output tokens whose decode time TTFT is compared with.")] = 256,
    batch: Annotated[int, typer.Option(help="Static batch size (requests run together).")] = 1,
    precision: Annotated[str | None, typer.Option(help="Scheme (default: the model's; fp16 without bf16).")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel GPUs per replica.")] = 1,
    ep: Annotated[int, typer.Option(help=EP_HELP)] = 1,
    kv_precision: Annotated[str | None, typer.Option(help=KV_HELP)] = None,
    engine: Annotated[str, typer.Option(help=ENGINE_HELP)] = "vllm",
    max_input: Annotated[int | None, typer.Option(help="Longest prompt to search (default: context-output).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Prompt length where TTFT overtakes the decode time of OUTPUT_LEN tokens (prefill starts to dominate)."""
    from infercast.analysis import compare as analysis

    res = analysis.crossover(
        model,
        gpu,
        output_len=output_len,
        batch=batch,
        precision=precision,
        tp=tp,
        ep=ep,
        kv_precision=kv_precision,
        engine=engine,
        max_input=max_input,
    )
    if json_out:
        emit_json(res)
        return
    t = Table(
        title=f"Phase crossover: {res['model']} on {res['gpu']} ({res['precision']}, tp {res['tp']}, "
        f"batch {res['batch']}), {output_len} output tokens",
        caption=str(res["message"]),
    )
    for col in ("prompt tokens", "TTFT", f"decode ({output_len} x TPOT)", "TTFT / decode", "fits memory"):
        t.add_column(col, justify="right")
    curve: dict[str, list] = res["curve"]  # type: ignore[assignment]
    x0 = res["crossover_input_len"]
    shown = sorted(set(np.linspace(0, len(curve["input_len"]) - 1, 12).round().astype(int).tolist()))
    rows = [(curve["input_len"][i], curve["ttft_s"][i], curve["decode_s"][i], curve["fits"][i], False) for i in shown]
    if x0 is not None:
        rows.append((x0, res["ttft_s"], res["decode_s"], res["fits"], True))
    for n, tt, dd, fits, mark in sorted(rows, key=lambda r: (r[0], r[4])):
        style = "bold green" if mark else ("" if tt < dd else "yellow")
        t.add_row(
            f"{n:,}" + (" <- crossover" if mark else ""),
            fmt_time(tt),
            fmt_time(dd),
            f"{tt / dd:.2f}",
            "yes" if fits else "[red]no[/]",
            style=style,
        )
    console.print(t)
