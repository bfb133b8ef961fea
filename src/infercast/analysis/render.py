"""Rich terminal rendering of predictions and memory budgets."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from infercast.display import fmt_bytes, fmt_count, fmt_pct, fmt_time
from infercast.specs.engine import engine_label

if TYPE_CHECKING:
    from infercast.analysis.report import PhaseReport
    from infercast.analysis.scenario import Prediction
    from infercast.memory import MemoryBudget


def render_memory(mem: MemoryBudget) -> Table:
    layout = mem.layout or f"tp{mem.tp}"
    t = Table(
        title=f"Memory per GPU: {mem.model_id} on {mem.gpu_id} ({layout}, {mem.precision}, "
        f"kv {mem.kv_precision}, {engine_label(mem.engine)})",
        show_header=False,
    )
    t.add_column("item")
    t.add_column("value", justify="right")
    t.add_row("capacity (as the driver exposes it)", fmt_bytes(mem.capacity_bytes))
    t.add_row("weights", fmt_bytes(mem.weights_bytes))
    for k, v in mem.weights_breakdown.items():
        t.add_row(f"  {k}", fmt_bytes(v))
    t.add_row("activations (peak, prior)", fmt_bytes(mem.activation_bytes))
    t.add_row("runtime (context, graphs, comm)", fmt_bytes(mem.runtime_overhead_bytes))
    t.add_row("KV pool", fmt_bytes(max(mem.kv_pool_bytes, 0)))
    t.add_row("KV per token", fmt_bytes(mem.kv_bytes_per_token))
    per_block = f"{mem.block_size} tokens"
    if mem.layer_groups[1]:  # a block holds one layer group (memory.kv_layer_groups)
        per_block += f" x {mem.layers_per_block} layers"
    t.add_row(f"KV blocks ({per_block})", f"{mem.num_blocks:,}")
    if mem.context is not None:
        t.add_row(f"KV for {mem.concurrency} x {mem.context} tokens", fmt_bytes(mem.kv_cache_bytes))
        t.add_row(f"max concurrency at {mem.context} tokens", f"{mem.max_concurrency(mem.context):,}")
    if mem.concurrency is not None:
        t.add_row(f"max context at concurrency {mem.concurrency}", f"{mem.max_context(mem.concurrency):,}")
    verdict = "[green]fits[/]" if mem.fits else f"[red]does not fit[/] (short by {fmt_bytes(mem.shortfall_bytes)})"
    t.add_row("verdict", verdict)
    for note in mem.notes:
        t.add_row("note", note)
    return t


def _phase_row(t: Table, p: PhaseReport) -> None:
    t.add_row(
        p.name,
        fmt_time(p.time_s),
        fmt_count(p.flops, "FLOP"),
        fmt_bytes(p.bytes),
        f"{p.arithmetic_intensity:.1f}",
        f"{p.ridge_point:.0f}",
        p.bound,
    )


def render_ops(p: PhaseReport) -> Table:
    t = Table(title=f"{p.name}: operators (per GPU, whole phase)")
    for col in ("operator", "group", "FLOPs", "bytes", "AI", "time", "share", "bound"):
        t.add_column(col, justify="left" if col in ("operator", "group", "bound") else "right")
    for o in sorted(p.ops, key=lambda o: -o.time_s):
        if o.time_s <= 0:
            continue
        t.add_row(
            o.name,
            o.group,
            fmt_count(o.flops),
            fmt_bytes(o.bytes),
            f"{o.arithmetic_intensity:.1f}",
            fmt_time(o.time_s),
            fmt_pct(o.share),
            o.bound,
        )
    return t


def _tpot_rows(head: Table, pred: Prediction, band: Callable[[str], str]) -> None:
    """TPOT rows: the batch mean, the last request's (or the front-end's pace), ITL, and a lone request's."""
    if pred.output_len == 1:
        head.add_row("TPOT / ITL", "undefined (one output token: no gap between tokens)")
        return
    many = pred.batch > 1
    if many:
        head.add_row("TPOT, mean over the batch: (E2E - TTFT) / (O - 1)", fmt_time(pred.tpot_s) + band("tpot"))
    last = "TPOT of the last request" if many else "TPOT"
    own_band = "" if many else band("tpot")
    if pred.front_end_paced:
        head.add_row(f"{last} (the API front-end's pace)", fmt_time(pred.tpot_last_s) + own_band)
        head.add_row("ITL (mean decode step of the batch)", fmt_time(pred.itl_s))
    else:
        head.add_row(f"{last} = ITL (mean decode step of the batch)", fmt_time(pred.itl_s) + own_band)
    head.add_row("TPOT of one request alone (batch 1)", fmt_time(pred.single_stream_tpot_s))


def render_prediction(pred: Prediction, ops: bool = False) -> Group:
    layout = (
        f" (tp {pred.tp} x attention-dp {pred.attention_dp} x pp {pred.pp}, ep {pred.ep})"
        if pred.pp > 1 or pred.attention_dp > 1
        else ""
    )
    head = Table(
        title=f"{pred.model} on {pred.gpus or pred.tp}x {pred.gpu}{layout} · {pred.precision} "
        f"(kv {pred.kv_precision}) · "
        f"{engine_label(pred.engine)} · in {pred.input_len} / out {pred.output_len} · batch {pred.batch}",
        show_header=False,
    )
    head.add_column("metric")
    head.add_column("value", justify="right")
    band = pred.confidence.text if pred.confidence else (lambda metric: "")
    many = pred.batch > 1
    if many:  # a static batch: the mean over its requests (as simulate --offline), then the last request's
        head.add_row(f"TTFT, mean over the batch's {pred.batch} requests", fmt_time(pred.ttft_s) + band("ttft"))
        head.add_row("TTFT of the last request (whole batch prefilled)", fmt_time(pred.ttft_last_s))
    else:
        head.add_row("TTFT", fmt_time(pred.ttft_s) + band("ttft"))
    serving = pred.ttft_last_s - pred.prefill.time_s - pred.front_end_s
    if pred.front_end_s > 0:
        terms = (pred.prefill.time_s, serving, pred.front_end_s)
        head.add_row("  = prefill + per-request overhead + front-end", " + ".join(map(fmt_time, terms)))
    elif serving > 0:  # the engine's per-request serving overhead (fitted per engine; provenance says on what)
        head.add_row("  = prefill + per-request overhead", f"{fmt_time(pred.prefill.time_s)} + {fmt_time(serving)}")
    _tpot_rows(head, pred, band)
    head.add_row("end-to-end", fmt_time(pred.e2e_s))
    head.add_row("output throughput", f"{pred.output_throughput_tok_s:,.0f} tok/s")
    head.add_row("total throughput", f"{pred.total_throughput_tok_s:,.0f} tok/s")
    mem = pred.memory
    head.add_row(
        "memory / GPU",
        f"{fmt_bytes(mem.total_bytes)} of {fmt_bytes(mem.capacity_bytes)}"
        + ("" if mem.fits else " [red](does not fit)[/]"),
    )
    phases = Table(title="Two-phase report (FLOPs and bytes for the whole replica)")
    for col in ("phase", "time", "FLOPs", "bytes", "AI (FLOP/B)", "ridge", "bound"):
        phases.add_column(col, justify="right" if col not in ("phase", "bound") else "left")
    _phase_row(phases, pred.prefill)
    _phase_row(phases, pred.decode)
    shares = Table(title="Where the time goes")
    shares.add_column("share of phase time")
    shares.add_column("prefill", justify="right")
    shares.add_column("decode", justify="right")
    for key in ("compute", "memory", "interconnect", "overhead"):
        shares.add_row(
            f"{key}-bound",
            fmt_pct(pred.prefill.time_share_by_ceiling[key]),
            fmt_pct(pred.decode.time_share_by_ceiling[key]),
        )
    groups = dict.fromkeys(list(pred.prefill.time_share_by_group) + list(pred.decode.time_share_by_group))
    for g in groups:
        a, b = pred.prefill.time_share_by_group.get(g, 0.0), pred.decode.time_share_by_group.get(g, 0.0)
        if max(a, b) >= 0.005:
            shares.add_row(f"  {g}", fmt_pct(a), fmt_pct(b))
    parts: list = [head, phases, shares]
    if ops:
        parts += [render_ops(pred.prefill), render_ops(pred.decode)]
    if pred.confidence and pred.confidence.warnings:
        parts += [Text(f"warning: {w}", style="yellow") for w in pred.confidence.warnings]
    if pred.advice:
        parts.append(Text("What would help:", style="bold"))
        parts += [Text(f"  • {tip}") for tip in pred.advice]
    return Group(*parts)
