"""Page 3, plan: the cheapest deployment within SLOs (in a job with progress); the ranked table, the Pareto
chart ($/Mtok against tok/s per user), the chosen fleet's check and its launch command."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import infercast
from infercast.ui import choices
from infercast.ui.forms import Form, cli_line
from infercast.ui.jobs import follow

FIELDS = (
    *("model", "gpus", "slo", "load", "rate", "daily", "input_len", "output_len", "precisions", "tps"),
    *("kv_precisions", "engines", "num_requests", "seed"),
)
DEFAULT_SLO = "ttft:p99:500ms tpot:p90:50ms"
TABLE_ROWS = 25


def _command():
    from infercast.cli.plan_cmd import plan

    return plan


def _length(text: str) -> int | str | None:
    digits = text.lstrip("-")
    return int(text) if digits.isascii() and digits.isdigit() else (text or None)


def read(form: Form, limits: Any) -> dict[str, Any]:
    """The keywords of :func:`infercast.plan` from the form."""
    load = form.get("load", "rate")
    kw: dict[str, Any] = {
        "model": form.path("model")[0] or "llama-3.1-8b",
        "gpus": form.many("gpus", ["h100-sxm", "a100-80gb"]),
        "slo": form.get("slo", DEFAULT_SLO),
        "rate": form.number("rate", 10.0, "--rate"),  # with a daily load: its peak
        "daily": (form.get("daily") or "diurnal") if load == "daily" else None,
        "input_len": _length(form.get("input_len", "1024")),
        "output_len": _length(form.get("output_len", "256")),
        "precisions": form.many("precisions") or None,
        "tps": form.integers("tps", [1, 2, 4], "--tps"),
        "kv_precisions": form.many("kv_precisions") or None,
        "engines": form.many("engines") or None,
        "num_requests": form.integer("num_requests", None, "--num-requests"),
        "seed": form.integer("seed", 0, "--seed"),
    }
    size = len(kw["gpus"]) * len(kw["precisions"] or [1, 2]) * len(kw["tps"])
    size *= len(kw["kv_precisions"] or [1]) * len(kw["engines"] or [1])
    if size > limits.plan_candidates:
        form.fail(
            "gpus",
            f"gpus: {size} candidates (GPUs x precisions x TPs x KV formats x engines); at most "
            f"{limits.plan_candidates} in the web UI, so that a plan ends within {limits.run_s:g} s",
        )
    form.at_most("num_requests", kw["num_requests"], 2000, f"each probe must end within {limits.run_s:g} s")
    return kw


def run_job(kw: dict[str, Any], folder: Path, progress: Any) -> dict[str, Any]:
    """The child process: search (serially: the server's cores are shared), keep what the page shows."""
    phases = {"prune": (0.0, 0.2), "search": (0.2, 0.9), "fleet": (0.9, 1.0)}

    def report(phase: str, done: int, total: int) -> None:
        low, high = phases.get(phase, (0.0, 1.0))
        progress(low + (high - low) * (done / total if total else 1.0), f"{phase} {done}/{total}")

    args = dict(kw)
    planner: Any = infercast.plan  # the module is callable (infercast.plan.planner.plan)
    result = planner(args.pop("model"), args.pop("gpus"), executor="serial", progress=report, **args)
    result.save_table(folder / "plan.csv")
    data = json.loads(json.dumps(result.to_dict(), default=str, allow_nan=True).replace("NaN", "null"))
    return {
        "rows": data["candidates"],
        "chosen": data["chosen"],
        "fleet_check": data["fleet_check"],
        "launch": data["launch"],
        "stats": data["stats"],
        "files": ["plan.csv"],
    }


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def pareto_chart(rows: list[dict[str, Any]], chosen: dict[str, Any] | None) -> dict[str, Any]:
    """Plotly figure: $/Mtok output against tok/s per user for every passing candidate; the frontier joined."""
    ok = [r for r in rows if r.get("status") == "pass" and _num(r.get("tok_s_per_user")) is not None]
    front = sorted(
        (r for r in ok if r.get("pareto_cost") or r.get("pareto_throughput")), key=lambda r: r["tok_s_per_user"]
    )
    data: list[dict[str, Any]] = [
        {"x": [r["tok_s_per_user"] for r in ok], "y": [r["usd_per_mtok_output"] for r in ok], "mode": "markers"}
        | {"name": "passing", "text": [r["label"] for r in ok], "marker": {"color": "#a0aec0", "size": 9}},
        {"x": [r["tok_s_per_user"] for r in front], "y": [r["usd_per_mtok_output"] for r in front]}
        | {"mode": "lines+markers", "name": "Pareto frontier", "text": [r["label"] for r in front]}
        | {"marker": {"color": "#2b6cb0", "size": 10}, "line": {"color": "#2b6cb0"}},
    ]
    if chosen and _num(chosen.get("tok_s_per_user")) is not None:
        data.append(
            {"x": [chosen["tok_s_per_user"]], "y": [chosen["usd_per_mtok_output"]], "mode": "markers+text"}
            | {"name": "chosen", "text": [chosen["label"]], "textposition": "top right"}
            | {"marker": {"color": "#e53e3e", "size": 14, "symbol": "star"}}
        )
    layout = {
        "xaxis": {"title": {"text": "output tok/s per user"}},
        "yaxis": {"title": {"text": "$ per million output tokens"}, "type": "log"},
        "margin": {"t": 20, "r": 10},
        "legend": {"orientation": "h", "y": -0.25},
    }
    return {"data": data, "layout": layout}


def cli_text(kw: dict[str, Any], form: Form) -> str:
    _, model_name = form.path("model")
    options: list[tuple[str, Any]] = [("--model", model_name or kw["model"]), ("--gpus", ",".join(kw["gpus"]))]
    options += [("--slo", kw["slo"]), ("--rate", kw["rate"]), ("--daily", kw["daily"])]
    options += [("--input-len", kw["input_len"]), ("--output-len", kw["output_len"])]
    for key, flag in (("precisions", "--precisions"), ("kv_precisions", "--kv-precisions"), ("engines", "--engines")):
        options.append((flag, ",".join(kw[key]) if kw[key] else None))
    options += [("--tps", ",".join(str(t) for t in kw["tps"])), ("--num-requests", kw["num_requests"])]
    options += [("--seed", kw["seed"] or None)]
    line = cli_line("plan", options)
    return line.replace("--slo '" + kw["slo"] + "'", "--slo " + kw["slo"]) if " " in kw["slo"] else line


def render(form: Form, state: Any) -> dict[str, Any]:
    kw = read(form, state.limits)
    context: dict[str, Any] = {"choices": choices, "kw": kw, "cli": cli_text(kw, form), "job": None, "result": None}
    if not form.submitted or form.errors:
        return context
    job, result = follow(form, state.jobs, "plan", run_job, kw, command=_command(), fields=FIELDS)
    context["job"] = job
    if result is not None:
        context["result"] = result
        context["rows"] = result["rows"][:TABLE_ROWS]
        context["pareto"] = pareto_chart(result["rows"], result["chosen"])
    return context
