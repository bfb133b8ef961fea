"""Page 2, simulate: a workload through the discrete-event simulator (in a job: progress, cancel, time limit);
latency CDFs, the running/waiting/KV timeline, goodput, warnings, and the Perfetto trace and request CSV."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import infercast
from infercast.errors import InfercastError
from infercast.ui import choices
from infercast.ui.forms import Form, cli_line
from infercast.ui.jobs import follow

FIELDS = (
    *("model", "gpu", "tp", "precision", "kv_precision", "engine", "scheduler", "max_num_seqs", "workload"),
    *("trace", "input_len", "output_len", "num_requests", "load", "rate", "concurrency", "burstiness"),
    *("replicas", "router", "prefill_instances", "decode_instances", "prefill_tp", "decode_tp", "goodput", "seed"),
)
DISAGG = ("prefill_instances", "decode_instances", "prefill_tp", "decode_tp")
CDF_POINTS = 400
TIMELINE_POINTS = 1500


def _command():
    from infercast.cli.simulate_cmd import simulate

    return simulate


def _length(text: str) -> int | str | None:
    """An integer, or a distribution spec (lognormal:1000,0.6) as the CLI reads ``--input-len``."""
    if not text:
        return None
    digits = text.lstrip("-")
    return int(text) if digits.isascii() and digits.isdigit() else text


def read(form: Form, limits: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(keywords of :func:`infercast.simulate`, what the CLI line needs) from the form."""
    workload = form.get("workload", "synthetic")
    trace, trace_name = form.path("trace") if workload == "trace" else ("", "")
    load = form.get("load", "rate")
    kw: dict[str, Any] = {
        "model": form.path("model")[0] or "llama-3.1-8b",
        "gpu": form.get("gpu", "h100-sxm"),
        "tp": form.integer("tp", 1, "--tp"),
        "precision": form.get("precision") or None,
        "kv_precision": form.get("kv_precision") or None,
        "engine": form.get("engine") or "vllm",
        "scheduler": form.get("scheduler") or None,
        "max_num_seqs": form.integer("max_num_seqs", None, "--max-num-seqs"),
        "trace": trace or None,
        "input_len": None if trace else _length(form.get("input_len", "1024")),
        "output_len": None if trace else _length(form.get("output_len", "256")),
        "num_requests": form.integer("num_requests", 500, "--num-requests"),
        "rate": form.number("rate", 10.0, "--rate") if load == "rate" else None,
        "concurrency": form.integer("concurrency", 32, "--concurrency") if load == "clients" else None,
        "burstiness": form.number("burstiness", 1.0, "--burstiness"),
        "replicas": form.integer("replicas", 1, "--replicas"),
        "router": form.get("router") or "round_robin",
        "goodput": form.get("goodput") or None,
        "seed": form.integer("seed", 0, "--seed"),
    }
    if load == "offline":
        kw["offline"] = True
    if workload == "trace" and not trace:
        form.fail("trace", "trace: choose a built-in trace or upload one")
    pools = {k: form.integer(k, None, "--" + k.replace("_", "-")) for k in DISAGG}
    if (kw["scheduler"] or "") != "disagg":
        given = next((k for k, v in pools.items() if v is not None), None)
        if given:  # as the CLI: pool sizes without the disaggregated scheduler are an error, not ignored
            form.fail(given, f"--{given.replace('_', '-')}: only applies with --scheduler disagg")
    else:
        from infercast.sim.config import DisaggConfig

        try:
            sizes: dict[str, Any] = {k: v for k, v in pools.items() if v is not None}
            kw["disagg"] = DisaggConfig(**sizes)
        except InfercastError as exc:
            form.library_error(exc, _command(), FIELDS, flag_fields=True)
    form.at_most("num_requests", kw["num_requests"], limits.sim_requests, f"a run must end within {limits.run_s:g} s")
    return kw, {"pools": pools, "trace_name": trace_name, "load": load, "workload": workload}


def validate(form: Form, kw: dict[str, Any]) -> None:
    """Build the run's configuration here (fast) so that bad input is answered beside its field at once."""
    from infercast.sim.api import config_from_keywords

    try:
        config_from_keywords(**kw)
    except InfercastError as exc:
        form.library_error(exc, _command(), FIELDS, flag_fields=True)


def _cdf(values: Any) -> dict[str, list[float]]:
    import numpy as np

    v = np.sort(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"x": [], "y": []}
    idx = np.unique(np.linspace(0, v.size - 1, min(CDF_POINTS, v.size)).round().astype(int))
    return {"x": (v[idx] * 1e3).tolist(), "y": ((idx + 1) / v.size).tolist()}


def _timeline(result: Any) -> dict[str, list[float]]:
    occ = result.occupancy()
    if occ.empty:
        return {"t": [], "running": [], "waiting": [], "kv_pct": []}
    total = occ.groupby(occ["t"].round(3))[["running", "waiting", "kv_blocks"]].sum()
    step = max(1, len(total) // TIMELINE_POINTS)
    total = total.iloc[::step]
    blocks = float(result.config.get("kv_blocks_per_replica") or 0) * int(result.config.get("replicas") or 1)
    kv = (total["kv_blocks"] / blocks * 100).tolist() if blocks else []
    return {"t": total.index.tolist(), "running": total["running"].tolist(), "waiting": total["waiting"].tolist()} | {
        "kv_pct": kv
    }


def run_job(kw: dict[str, Any], folder: Path, progress: Any) -> dict[str, Any]:
    """The child process: simulate, write the downloads, return what the page shows."""
    from infercast.sim.api import config_from_keywords
    from infercast.sim.export import write_requests
    from infercast.sim.perfetto import write_chrome_trace

    progress(None, "simulating")
    result = infercast.simulate(config_from_keywords(**kw, trace_steps=200_000, sample_interval=0.05))
    progress(0.9, "writing the trace and CSV")
    write_requests(result, folder / "requests.csv")
    write_chrome_trace(result, folder / "trace.json.gz")
    df = result.requests()
    summary = json.loads(json.dumps(result.to_dict(), default=str))
    return {
        "summary": summary,
        "cdf": {m: _cdf(df[f"{m}_s"]) for m in ("ttft", "tpot", "e2e")},
        "timeline": _timeline(result),
        "warnings": list(summary.get("warnings") or []),
        "files": ["requests.csv", "trace.json.gz"],
    }


def cdf_chart(cdf: dict[str, dict[str, list[float]]], metric: str) -> dict[str, Any]:
    data = [{"x": cdf[metric]["x"], "y": cdf[metric]["y"], "mode": "lines", "name": metric.upper()}]
    layout: dict[str, Any] = {"xaxis": {"title": {"text": f"{metric.upper()} (ms)"}}}
    layout |= {"yaxis": {"title": {"text": "share"}}, "margin": {"t": 20, "r": 10}, "showlegend": False}
    return {"data": data, "layout": layout}


def timeline_chart(tl: dict[str, list[float]]) -> dict[str, Any]:
    data = [
        {"x": tl["t"], "y": tl["running"], "mode": "lines", "name": "running", "line": {"color": "#2b6cb0"}},
        {"x": tl["t"], "y": tl["waiting"], "mode": "lines", "name": "waiting", "line": {"color": "#c05621"}},
        {"x": tl["t"], "y": tl["kv_pct"], "mode": "lines", "name": "KV use %", "yaxis": "y2"}
        | {"line": {"color": "#38a169", "dash": "dot"}},
    ]
    layout = {
        "xaxis": {"title": {"text": "time (s)"}},
        "yaxis": {"title": {"text": "requests"}},
        "yaxis2": {"title": {"text": "KV use %"}, "overlaying": "y", "side": "right", "range": [0, 100]}
        | {"dtick": 25, "showgrid": False},
        "margin": {"t": 20, "r": 50},
        "legend": {"orientation": "h", "y": -0.3},
    }
    return {"data": data, "layout": layout}


def cli_text(kw: dict[str, Any], extra: dict[str, Any], form: Form) -> str:
    _, model_name = form.path("model")
    options: list[tuple[str, Any]] = [("--model", model_name or kw["model"]), ("--gpu", kw["gpu"])]
    for key in ("tp", "precision", "kv_precision", "engine", "scheduler", "max_num_seqs"):
        default = {"tp": 1, "engine": "vllm"}.get(key)
        options.append(("--" + key.replace("_", "-"), None if kw[key] == default else kw[key]))
    if kw["trace"]:
        options.append(("--trace", extra["trace_name"]))
    else:
        options += [("--input-len", kw["input_len"]), ("--output-len", kw["output_len"])]
    options += [("--num-requests", kw["num_requests"]), ("--rate", kw["rate"]), ("--concurrency", kw["concurrency"])]
    options += [("--offline", kw.get("offline", False))]
    options += [("--burstiness", None if kw["burstiness"] == 1.0 else kw["burstiness"])]
    options += [("--replicas", None if kw["replicas"] == 1 else kw["replicas"])]
    options += [("--router", None if kw["router"] == "round_robin" else kw["router"])]
    if kw.get("disagg") is not None:
        options += [("--" + k.replace("_", "-"), v) for k, v in extra["pools"].items()]
    options += [("--goodput", kw["goodput"]), ("--seed", kw["seed"] or None)]
    options += [("--requests-out", "requests.csv"), ("--trace-out", "trace.json.gz")]
    return cli_line("simulate", options)


def render(form: Form, state: Any) -> dict[str, Any]:
    kw, extra = read(form, state.limits)
    context: dict[str, Any] = {"choices": choices, "kw": kw, "extra": extra, "cli": cli_text(kw, extra, form)}
    context |= {"job": None, "result": None, "disagg_fields": DISAGG}
    if not form.submitted or form.errors:
        return context
    validate(form, kw)
    if form.errors or form.banner:
        return context
    job, result = follow(form, state.jobs, "simulate", run_job, kw, command=_command(), fields=FIELDS, flag_fields=True)
    context["job"] = job
    if result is not None:
        context["result"] = result
        context["charts"] = {m: cdf_chart(result["cdf"], m) for m in ("ttft", "tpot", "e2e")}
        context["charts"]["timeline"] = timeline_chart(result["timeline"])
    return context
