"""Page 4, calibrate / validate: a ``vllm bench serve``, GuideLLM or AIPerf result against the prediction per
point, and a profile fitted on it (downloadable)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infercast.errors import InfercastError
from infercast.ui import choices
from infercast.ui.forms import Form, cli_line
from infercast.ui.jobs import follow

FIELDS = ("bench", "bench_format", "model", "gpu", "tp", "ep", "precision", "engine", "concurrency", "request_rate")
METRICS = {"serving_ttft": "TTFT", "serving_tpot": "TPOT", "serving_throughput": "output tok/s"}


def _command():
    from infercast.cli.calibration_cmds import validate

    return validate


def read(form: Form) -> tuple[dict[str, Any], str]:
    path, name = form.path("bench")
    facts = {
        "model": form.get("model"),
        "gpu": form.get("gpu"),
        "tp": form.integer("tp", None, "--tp"),
        "ep": form.integer("ep", None, "--ep"),
        "precision": form.get("precision"),
        "engine": form.get("engine"),
        "concurrency": form.integer("concurrency", None, "--concurrency"),
        "request_rate": form.number("request_rate", None, "--request-rate"),
    }
    if form.submitted and not path:
        form.fail("bench", "bench: upload a benchmark result file first (vllm bench serve JSON, GuideLLM, AIPerf)")
    return {"path": path, "format": form.get("bench_format", "auto"), "facts": facts}, name


def run_job(kw: dict[str, Any], folder: Path, progress: Any) -> dict[str, Any]:
    """The child process: read the file, predict every point, fit a profile for its GPU."""
    from infercast.ui import bench_adapter

    progress(0.1, "reading the result file")
    recs = bench_adapter.records(kw["path"], kw["format"], kw["facts"])
    progress(0.3, f"predicting {len(recs)} points")
    points, refused, summary = bench_adapter.compare(recs)
    if not points:
        raise InfercastError(f"no point could be predicted; first: {refused[0]}", field="data")
    gpus = sorted({r.gpu for r in recs})
    out: dict[str, Any] = {"points": points, "refused": refused, "summary": summary, "gpu": gpus[0], "files": []}
    progress(0.6, f"fitting a profile for {gpus[0]}")
    try:
        out["profile"] = bench_adapter.fit_profile(recs, gpus[0], folder / f"{gpus[0]}.yaml")
        out["files"].append(f"{gpus[0]}.yaml")
    except InfercastError as exc:
        out["profile"] = None
        out["warnings"] = [f"no profile fitted: {exc}"]
    return out


def scatter(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Plotly figure: predicted against measured, one colour per metric, relative to the y = x line."""
    data: list[dict[str, Any]] = []
    for metric, label in METRICS.items():
        rows = [p for p in points if p["metric"] == metric and p["measured"] > 0]
        if not rows:
            continue
        ratio = [p["predicted"] / p["measured"] for p in rows]
        text = [f"c={p['batch']} in={p['input_len']} out={p['output_len']}" for p in rows]
        data.append({"x": [p["batch"] for p in rows], "y": ratio, "mode": "markers", "name": label, "text": text})
        data[-1]["marker"] = {"size": 11}
    data.append({"x": [0.8, max([p["batch"] for p in points] + [1]) * 1.25], "y": [1, 1], "mode": "lines"})
    data[-1] |= {"name": "exact", "line": {"color": "#718096", "dash": "dash"}}
    layout = {
        "xaxis": {"type": "log", "title": {"text": "concurrency (clients)"}},
        "yaxis": {"title": {"text": "predicted / measured"}},
        "margin": {"t": 20, "r": 10},
        "legend": {"orientation": "h", "y": -0.25},
    }
    return {"data": data, "layout": layout}


def cli_text(kw: dict[str, Any], name: str) -> str:
    f = kw["facts"]
    options: list[tuple[str, Any]] = [("--bench", name or "RESULT.json")]
    options += [("--bench-format", None if kw["format"] == "auto" else kw["format"])]
    options += [("--" + k.replace("_", "-"), f[k]) for k in ("model", "gpu", "tp", "ep", "precision", "engine")]
    options += [("--concurrency", f["concurrency"]), ("--request-rate", f["request_rate"]), ("--points", True)]
    line = cli_line("validate", options)
    calibrate = cli_line("calibrate", [(flag, value) for flag, value in options if flag != "--points"])
    return f"{line}\n{calibrate} --no-project-data --allow-few-points --out profiles/"


def render(form: Form, state: Any) -> dict[str, Any]:
    from infercast.ui import bench_adapter

    kw, name = read(form)
    context: dict[str, Any] = {"choices": choices, "kw": kw, "bench_name": name, "cli": cli_text(kw, name)}
    context |= {"formats": bench_adapter.BENCH_FORMATS, "job": None, "result": None, "metrics": METRICS}
    if not form.submitted or form.errors:
        return context
    job, result = follow(form, state.jobs, "validate", run_job, kw, command=_command(), fields=FIELDS)
    context["job"] = job
    if result is not None:
        context["result"] = result
        context["scatter"] = scatter(result["points"])
    return context
