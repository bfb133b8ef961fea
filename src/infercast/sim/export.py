"""Write a simulation's per-request table to a file, and render its summary like ``vllm bench serve``."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from infercast.errors import InfercastError
from infercast.files import atomic_path
from infercast.sim.labels import run_label, slo_text

if TYPE_CHECKING:
    from infercast.sim.api import SimulationResult

CSV_SUFFIXES = (".csv", ".csv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")


def _kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(CSV_SUFFIXES):
        return "csv"
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    raise InfercastError(
        f"cannot tell the format of {path.name!r}: name it *.csv, *.csv.gz or *.parquet", field="requests_out"
    )


def write_requests(result: SimulationResult, path: str | Path) -> Path:
    """Write the per-request table (``result.requests()``, with a leading ``request_id`` column) to ``path``.

    The format follows the extension: ``.csv`` (``.csv.gz`` compressed) or ``.parquet`` / ``.pq`` (needs
    pyarrow). Times are in seconds; unfinished requests have empty (NaN) times. Returns the path.
    """
    path = Path(path)
    kind = _kind(path)
    if kind == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise InfercastError(
            "writing Parquet needs pyarrow: pip install 'infercast[parquet]', or write a .csv file instead",
            field="requests_out",
        )
    df = result.requests()
    df.insert(0, "request_id", df.index.to_numpy())
    with atomic_path(path, "requests_out") as tmp:  # all or nothing: never a half-written table
        if kind == "csv":
            df.to_csv(tmp, index=False)
        else:
            df.to_parquet(tmp, index=False, engine="pyarrow")
    return path


def _num(value: Any, fmt: str = ",.2f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


def _ms(seconds: float | None) -> str:
    return _num(None if seconds is None else seconds * 1e3)


def summary_table(result: SimulationResult) -> Table:
    """A ``vllm bench serve``-style summary: requests, duration, throughputs, goodput, TTFT/TPOT/ITL/E2E
    (mean, median, P99 in ms), then queueing, preemptions, prefix-cache hits and any saturation warning."""
    s = result.summary
    cfg = result.config
    df = result.requests()
    finished = df[df["finish_s"].notna()]
    title = "Serving Benchmark Result (simulated)"
    caption = run_label(cfg)
    t = Table(title=title, caption=caption, show_header=False, title_style="bold")
    t.add_column("metric", style="", no_wrap=True)
    t.add_column("value", justify="right", no_wrap=True)

    completed, total = int(s.get("completed", len(finished))), int(s.get("num_requests", len(df)))
    t.add_row("Successful requests", f"{completed:,}" + (f" of {total:,}" if completed != total else ""))
    t.add_row("Benchmark duration (s)", _num(s.get("duration_s")))
    t.add_row("Total input tokens", f"{int(finished['prompt_tokens'].sum()):,}")
    t.add_row("Total generated tokens", f"{int(finished['output_tokens'].sum()):,}")
    t.add_row("Request throughput (req/s)", _num(s.get("request_throughput_req_s")))
    if "slo" in s:
        t.add_row("Request goodput (req/s)", _num(s.get("goodput_req_s")))
        t.add_row(
            f"SLO attainment ({slo_text(s['slo'])})", _num(100 * s.get("slo_attainment", float("nan")), ".1f") + " %"
        )
    t.add_row("Output token throughput (tok/s)", _num(s.get("output_throughput_tok_s")))
    t.add_row("Total token throughput (tok/s)", _num(s.get("total_throughput_tok_s")), end_section=True)

    sections = (
        ("ttft_s", "Time to First Token", "TTFT"),
        ("tpot_s", "Time per Output Token (excl. 1st token)", "TPOT"),
        ("itl_s", "Inter-token Latency", "ITL"),
        ("e2e_s", "End-to-end Latency", "E2EL"),
        ("queue_s", "Queueing (engine waiting queue, before first schedule)", "queue"),
    )
    conf = getattr(result, "confidence", None)
    for key, heading, short in sections:
        stats = s.get(key) or {}
        t.add_row(f"[bold]{heading}[/]", "")
        band = conf.text(key.removesuffix("_s")) if conf else ""
        t.add_row(f"Mean {short} (ms)", _ms(stats.get("mean")) + band)
        t.add_row(f"Median {short} (ms)", _ms(stats.get("p50")))
        t.add_row(f"P99 {short} (ms)", _ms(stats.get("p99")), end_section=True)

    t.add_row("[bold]Engine[/]", "")
    t.add_row("Preemptions", f"{int(s.get('preemptions', 0)):,}")
    t.add_row("Prefix-cache hit rate", _num(100 * s.get("prefix_cache_hit_rate", 0.0), ".1f") + " %")
    if "mean_decode_batch" in s:
        t.add_row("Mean decode batch (sequences per decode step)", _num(s["mean_decode_batch"], ".1f"))
    pools = s.get("pool_busy_fraction")
    if pools:  # disaggregated: say which pool is busy (the mean over both hides a saturated one)
        for pool, busy in pools.items():
            t.add_row(f"Busy fraction, {pool} pool", _num(100 * busy, ".1f") + " %")
    elif "busy_fraction" in s:
        t.add_row("Busy fraction", _num(100 * s["busy_fraction"], ".1f") + " %")
    if s.get("front_end_busy_fraction") is not None:
        t.add_row("API front-end busy fraction", _num(100 * s["front_end_busy_fraction"], ".1f") + " %")
    if s.get("saturated"):
        reason = s.get("saturation_reason", "the queue grows through the run: the offered load exceeds capacity")
        t.add_section()
        t.add_row("[bold red]WARNING: saturated[/]", "[red]latencies grow with the run length[/]")
        t.caption = f"[red]Saturated: {reason}[/]\n{caption}"
    if conf and conf.warnings:  # in the caption, which wraps (the value column does not)
        t.caption = "\n".join(f"[yellow]warning: {w}[/]" for w in conf.warnings) + f"\n{t.caption}"
        t.caption_justify = "left"
    return t
