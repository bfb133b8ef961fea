"""`infercast models`, `infercast gpus`, `infercast show-model`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from infercast.cli.common import JSON_HELP, console, emit_json
from infercast.display import fmt_bytes, fmt_count
from infercast.specs.catalog import get_model, list_hardware, list_models


def models(json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False) -> None:
    """List the built-in models."""
    rows = list_models()
    if json_out:
        emit_json([m.summary() | {"published_params": m.published_params} for m in rows])
        return
    t = Table(title="Built-in models")
    for col in ("id", "attention", "layers", "hidden", "params", "active", "KV/token (bf16)", "context"):
        t.add_column(col, justify="left" if col in ("id", "attention") else "right")
    for m in rows:
        t.add_row(
            m.id,
            m.attention_kind
            + (" + MoE" if m.moe else "")
            + (" + SWA" if m.num_sliding_layers and m.local_attention == "sliding" else ""),
            str(m.num_layers),
            str(m.hidden_size),
            fmt_count(m.total_params),
            fmt_count(m.active_params),
            fmt_bytes(m.kv_bytes_per_token(2)),
            f"{m.max_context:,}",
        )
    console.print(t)


def gpus(json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False) -> None:
    """List the built-in accelerators (dense peaks)."""
    rows = list_hardware()
    if json_out:
        emit_json([h.model_dump() for h in rows])
        return
    t = Table(title="Built-in accelerators (dense peaks, SI units)")
    columns = ("id", "name", "HBM", "usable", "TB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "fp4 TFLOP/s", "link GB/s", "$/h")
    for col in columns:
        t.add_column(col, justify="left" if col in ("id", "name") else "right")
    for h in rows:
        peak = h.peak_flops

        def tf(key: str, peak: dict = peak) -> str:
            return f"{peak[key] / 1e12:,.0f}" if key in peak else "-"

        t.add_row(
            h.id,
            h.name,
            fmt_bytes(h.memory.capacity_bytes),
            fmt_bytes(h.memory.usable),
            f"{h.memory.bandwidth_bytes_s / 1e12:.2f}",
            tf("bf16") if "bf16" in peak else tf("fp16") + " (fp16)",
            tf("fp8"),
            tf("fp4"),
            f"{h.interconnect.bandwidth_bytes_s / 1e9:,.0f}",
            f"{h.price_per_hour_usd:.2f}",
        )
    console.print(t)


def show_model(
    model: Annotated[str, typer.Argument(help="Catalog id or path to a HuggingFace config.json (or its folder).")],
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Show a model's architecture and derived parameter / KV-cache figures."""
    m = get_model(model)
    info = m.summary()
    info["kv_bytes_per_token_bf16"] = m.kv_bytes_per_token(2)
    info["published_params"] = m.published_params
    info["published_active_params"] = m.published_active_params
    if json_out:
        emit_json(info)
        return
    t = Table(title=f"{m.name} ({m.id})", show_header=False)
    t.add_column("field")
    t.add_column("value")
    for k, v in info.items():
        counts = ("total_params", "active_params", "published_params", "published_active_params")
        if k in counts and isinstance(v, int | float) and v:
            v = f"{fmt_count(float(v))} ({int(v):,})"
        elif k == "kv_bytes_per_token_bf16" and isinstance(v, int | float):
            v = fmt_bytes(float(v))
        t.add_row(k, str(v))
    console.print(t)
