"""`infercast plan`: the cheapest deployment that serves a rate within percentile SLOs, verified by simulation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from infercast.cli.analysis_cmds import parse_names
from infercast.cli.common import (
    JSON_HELP,
    StreamTokenOption,
    console,
    emit_json,
    err_console,
    parse_int_list,
    stream_token_seconds,
)
from infercast.cli.launch_opts import LaunchOption, launch_knobs
from infercast.errors import InfercastError
from infercast.specs.engine import engine_label

if TYPE_CHECKING:
    from infercast.plan.candidates import CandidateSpace
    from infercast.plan.request import PlanRequest
    from infercast.plan.result import PlanResult

SLO_HELP = (
    "Objectives, space-separated: METRIC:pNN:TIME (ttft, tpot, e2e; e.g. ttft:p99:200ms tpot:p90:50ms "
    "e2e:p99:20s) or METRIC:TIME (a goodput limit met by --attainment of the requests)."
)
STATUS_STYLE = {"pass": "", "fail": "red", "bounded": "yellow", "pruned": "dim"}


def _length(value: str | None) -> int | str | None:
    if value is None:
        return None
    return int(value) if value.strip().isdigit() else value


def plan(
    slo: Annotated[str, typer.Option(help=SLO_HELP)],
    model: Annotated[str, typer.Option(help="Catalog id or config.json path.")] = "llama-3.1-8b",
    gpus: Annotated[str, typer.Option(help="Comma-separated accelerator ids.")] = "l40s,a100-80gb,h100-sxm,h200",
    rate: Annotated[float | None, typer.Option(help="Target request rate (req/s) to size the fleet for.")] = None,
    input_len: Annotated[str | None, typer.Option(help="Prompt tokens: N or a distribution (lognormal:m,s).")] = None,
    output_len: Annotated[str | None, typer.Option(help="Output tokens: N or a distribution.")] = None,
    trace: Annotated[str | None, typer.Option(help="Lengths from a trace: azure_conv, azure_code, a file.")] = None,
    attainment: Annotated[float | None, typer.Option(help="Share meeting goodput limits (default 0.99).")] = None,
    precisions: Annotated[str | None, typer.Option(help="Schemes to try, e.g. bf16,fp8 (default: native).")] = None,
    tps: Annotated[str, typer.Option(help="Tensor-parallel sizes to try, e.g. 1,2,4,8.")] = "1,2,4,8",
    ep: Annotated[str | None, typer.Option(help="Expert-parallel ways to try (MoE).")] = None,
    pps: Annotated[str | None, typer.Option(help="Pipeline-stage counts to try (aggregated), e.g. 1,2.")] = None,
    attention_dps: Annotated[
        str | None,
        typer.Option("--attention-dps", help="Attention data-parallel sizes to try (MoE wide EP), e.g. 1,8."),
    ] = None,
    kv_precisions: Annotated[str | None, typer.Option(help="KV-cache formats to try, e.g. bf16,fp8.")] = None,
    engines: Annotated[str, typer.Option(help="Engines to try: vllm, vllm-0.14, sglang, trtllm.")] = "vllm",
    max_num_seqs: Annotated[str | None, typer.Option(help="Max running requests to try, e.g. 128,256,512.")] = None,
    chunk: Annotated[str | None, typer.Option(help="Chunk budgets (tokens per step) to try, e.g. 2048,8192.")] = None,
    disagg: Annotated[str | None, typer.Option(help="Also try prefill:decode groups, e.g. 1:1,1:2.")] = None,
    decode_tps: Annotated[str | None, typer.Option(help="Decode-pool TPs for --disagg (default: --tps).")] = None,
    no_aggregated: Annotated[bool, typer.Option("--no-aggregated", help="Only disaggregated groups.")] = False,
    price: Annotated[str | None, typer.Option(help="Price overrides, $/GPU-hour: h100-sxm=2.5,h200=3.1")] = None,
    num_requests: Annotated[int | None, typer.Option(help="Requests per simulated probe (default 400).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of lengths and arrivals.")] = 0,
    workers: Annotated[int | None, typer.Option(help="Local worker processes (default: all cores).")] = None,
    ray: Annotated[
        bool, typer.Option("--ray", help="Run the searches on Ray (pip install 'infercast\\[ray]').")
    ] = False,
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address (implies --ray).")] = None,
    exhaustive: Annotated[bool, typer.Option("--exhaustive", help="Search every candidate (no cost bound).")] = False,
    daily: Annotated[str | None, typer.Option(help="Daily load: diurnal[:TROUGH], a CSV of rates, or a trace.")] = None,
    scale_up_delay: Annotated[float, typer.Option(help="Autoscaling what-if: seconds before a new unit serves.")] = 300,
    stream_token_us: StreamTokenOption = None,
    top: Annotated[int, typer.Option(help="Rows of the table to show.")] = 15,
    out: Annotated[Path | None, typer.Option(help="Write the ranked table: .csv or .parquet.")] = None,
    plot: Annotated[Path | None, typer.Option(help="Write the Pareto plot: .png or .svg.")] = None,
    launch: LaunchOption = None,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Cheapest deployment serving --rate within --slo: pruned analytically, max rate per unit bisected on the
    simulator, fleet sized and re-simulated; ranked table, Pareto plot and launch command."""
    from infercast.plan.costing import gpu_prices, parse_prices
    from infercast.plan.request import Execution, PlanRequest, slo_set, target_load
    from infercast.plan.traffic import DEFAULT_PROBE_REQUESTS, Traffic
    from infercast.specs.catalog import get_model

    _check_outputs(out, plot)  # refused before a long search, not after
    grid = _Grid(precisions, tps, ep, pps, attention_dps, kv_precisions, engines, max_num_seqs, chunk, decode_tps)
    prices, stream_token_s = parse_prices(price), stream_token_seconds(stream_token_us)
    knobs = launch_knobs(launch) if launch is not None else {}
    spec = get_model(model)
    target, day = target_load(rate, daily, scale_up_delay)
    slos = slo_set(slo, attainment)
    probes = DEFAULT_PROBE_REQUESTS if num_requests is None else num_requests
    traffic = Traffic(_length(input_len), _length(output_len), trace=trace, rate=target, num_requests=probes, seed=seed)
    space = grid.space(parse_names("gpus", gpus) or [], knobs, disagg, not no_aggregated)
    executor = Execution("ray" if ray or ray_address else "local", workers, ray_address, exhaustive=exhaustive)
    costs = gpu_prices(list(space.gpus), prices)
    request = PlanRequest(spec, space, traffic, slos, costs, stream_token_s, day, executor)
    result = _run(request, with_bar=not json_out and err_console.is_terminal)
    written = _write_files(result, out, plot)
    if json_out:
        emit_json({**result.to_dict(), "written": [str(p) for p in written]})
        return
    render(result, top)
    for p in written:
        console.print(f"wrote {p}")


class _Grid:
    """The search-space flags, parsed (each a one-line error naming its flag)."""

    def __init__(
        self,
        precisions: str | None,
        tps: str,
        ep: str | None,
        pps: str | None,
        attention_dps: str | None,
        kv_precisions: str | None,
        engines: str,
        max_num_seqs: str | None,
        chunk: str | None,
        decode_tps: str | None,
    ):
        self.precisions = parse_names("precisions", precisions)
        self.tps = parse_int_list("tps", tps)
        self.eps = parse_int_list("ep", ep)
        self.kv_precisions = parse_names("kv_precisions", kv_precisions)
        self.engines = parse_names("engines", engines)
        self.max_num_seqs = parse_int_list("max_num_seqs", max_num_seqs)
        self.chunk = parse_int_list("chunk", chunk)
        self.decode_tps = parse_int_list("decode_tps", decode_tps)
        self.pps = parse_int_list("pps", pps)
        self.attention_dps = parse_int_list("attention_dps", attention_dps)

    def space(self, gpus: list[str], knobs: dict[str, Any], disagg: str | None, aggregated: bool) -> CandidateSpace:
        """The candidate grid over ``gpus``; ``knobs`` (from --launch) replace the flags they set."""
        from infercast.plan.candidates import CandidateSpace

        space = CandidateSpace.build(
            gpus,
            precisions=self.precisions,
            tps=knobs.get("tps", self.tps),
            eps=self.eps,
            kv_precisions=knobs.get("kv_precisions", self.kv_precisions),
            engines=knobs.get("engines", self.engines),
            max_num_seqs=knobs.get("max_num_seqs", self.max_num_seqs),
            max_num_batched_tokens=knobs.get("max_num_batched_tokens", self.chunk),
            ratios=disagg,
            decode_tps=self.decode_tps,
            pps=self.pps,
            attention_dps=self.attention_dps,
        )
        return space if aggregated else replace(space, aggregated=False)


def _check_outputs(out: Path | None, plot: Path | None) -> None:
    """Refuse a table or plot path of the wrong kind now, before the search."""
    from infercast.analysis.roofline_plot import image_format
    from infercast.plan.result import TABLE_FORMATS

    if out is not None and out.suffix.lower() not in TABLE_FORMATS:
        raise InfercastError(f"table file must end in {' or '.join(TABLE_FORMATS)}, got {out.name!r}", field="out")
    if plot is not None:
        image_format(plot)


def _run(request: PlanRequest, with_bar: bool) -> PlanResult:
    """Run the plan, with a progress bar per phase on the terminal when ``with_bar``."""
    from infercast.plan import run_plan

    if not with_bar:
        return run_plan(request)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(f"{phase:>8}", total=total)
            bar.update(tasks[phase], completed=done, total=total)

        return run_plan(replace(request, execution=replace(request.execution, progress=progress)))


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _num(v: object, fmt: str) -> str:
    return "-" if _missing(v) else format(v, fmt)


PLAN_LEGEND = (
    "req/s: the most one unit serves within the SLO; unit $/h: one unit's price; fleet: units x GPUs for the "
    "target rate and the fleet's $/h; $/Mtok: unit $/h over its output tokens/s; SLO columns: ms at that "
    "rate; * on a Pareto front (tokens/s/GPU vs tokens/s/user, or $/Mtok vs p99 E2E); ! on a cliff (TTFT queues "
    "for KV blocks or batch slots at its max rate: a little more load or memory pressure swings it)"
)


def _write_files(result: Any, out: Path | None, plot: Path | None) -> list[Path]:
    """Write the ranked table and the Pareto plot where asked; the paths written."""
    written = []
    if out is not None:
        written.append(result.save_table(out))
    if plot is not None:
        from infercast.plan.plot import save_pareto

        written.append(save_pareto(result, plot))
    return written


def _row_notes(result: Any, top: int) -> None:
    """Under the table: why each shown candidate failed, and the cliff of each passing one that sits on one."""
    for r in result.table.head(top).to_dict(orient="records"):
        if r["status"] != "pass":
            console.print(f"  {r['label']}: {r['reason']}", style="dim", markup=False, highlight=False)
        elif r.get("cliff"):
            console.print(f"  {r['label']}: cliff: {r['cliff']}", style="yellow", markup=False, highlight=False)


def render(result: PlanResult, top: int) -> None:
    """Ranked table, the chosen deployment with its fleet check, and its launch command."""
    s, st = result.settings, result.stats
    front_end = s.get("stream_token_s")
    streams = "" if front_end is None else f"; API front-end {1e6 * front_end:g} us per streamed token"
    t = Table(
        title=f"Plan: {s['model']}, {s['traffic']}; SLO {s['slo_text']}{streams}", box=box.SIMPLE_HEAD, pad_edge=False
    )
    terms = [
        t_["metric"] + (f" p{t_['percentile']:g}" if t_["percentile"] is not None else "") for t_ in s["slo"]["terms"]
    ]
    t.add_column("candidate", no_wrap=True, min_width=12)
    for col in ("req/s", "unit $/h", "fleet, $/h", "$/Mtok", "tok/s/GPU", "tok/s/usr", *terms):
        t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    t.add_column("binds", no_wrap=True, min_width=10)
    for r in result.table.head(top).to_dict(orient="records"):
        why = r["binding"] if r["status"] in ("pass", "fail") else r["status"]
        units = "-" if _missing(r["replicas"]) else f"{r['replicas']:.0f}×{r['gpus_per_unit']}"
        measured = r["slo_measured_ms"] or {}
        t.add_row(
            r["label"]
            + (" *" if r["pareto_throughput"] or r["pareto_cost"] else "")
            + (" !" if r.get("cliff") else ""),
            _num(r["max_rate_req_s"], ".3g"),
            _num(r["unit_usd_per_hour"], ",.2f"),
            units + ("" if _missing(r["fleet_usd_per_hour"]) else f", {r['fleet_usd_per_hour']:,.2f}"),
            _num(r["usd_per_mtok_output"], ".3g"),
            _num(r["output_tok_s_per_gpu"], ",.0f"),
            _num(r["tok_s_per_user"], ".1f"),
            *[f"{measured[k]:.0f}" if k in measured else "-" for k in terms],
            str(why),
            style=STATUS_STYLE[r["status"]],
        )
    console.print(t)
    console.print(
        f"{st['candidates']} candidates: {st['pruned']} pruned analytically, {st['bounded']} cut by the cost "
        f"bound, {st['searched']} searched ({st['passing']} pass), {st['simulations']} simulations, "
        f"{st['seconds_total']:.1f} s",
        highlight=False,
    )
    console.print(PLAN_LEGEND, style="dim", highlight=False)
    _row_notes(result, top)
    if result.chosen is None:
        console.print("[red]no candidate meets the SLO[/]: relax it, add GPUs/TPs, or see the reasons above")
        return
    c = result.chosen
    engine = f" on {engine_label(c['engine'])}" if c.get("engine") else ""
    console.print(f"[bold]chosen[/]: {c['label']}{engine} — {c['max_rate_req_s']:.3g} req/s per unit")
    band = c.get("error_band")
    if band and band.get("error_bands"):
        parts = [
            f"{k.upper()} ± {v['typical_pct']:g} % (p90 {v['p90_pct']:g} %)" for k, v in band["error_bands"].items()
        ]
        console.print("expected prediction error here: " + ", ".join(parts))
    for warning in (band or {}).get("warnings", []):
        console.print(f"[yellow]note[/]: {warning}")
    f = result.fleet_check
    if f is not None:
        verdict = "[green]meets[/]" if f["passes"] else "[red]misses[/]"
        measured = ", ".join(f"{k} {v:.0f} ms" for k, v in f["slo_measured_ms"].items())
        console.print(
            f"fleet check: {f['replicas']} unit(s) at {f['rate_req_s']:g} req/s {verdict} the SLO in "
            f"simulation ({measured}; {f['slo_attainment']:.1%} of requests within every limit)"
        )
    for line in result.launch:
        console.print(
            line, style="dim" if line.startswith("#") else "bold", markup=False, highlight=False, soft_wrap=True
        )  # one line, to copy and paste
    d = result.daily
    if d is not None:
        hourly = d.intervals.groupby(d.intervals["start_h"].astype(int))["units_needed"].max()
        console.print(
            f"daily load ({d.source}): autoscaled ${d.autoscaled_usd:,.2f} vs fixed {d.fixed_units} units "
            f"${d.fixed_usd:,.2f} ({d.saving:.0%} saved); scale-up delay {d.scale_up_delay_s:g} s leaves "
            f"{d.requests_above_capacity:.2%} of requests arriving above ready capacity"
        )
        console.print("units needed by hour: " + " ".join(str(int(v)) for v in hourly.to_numpy()))
