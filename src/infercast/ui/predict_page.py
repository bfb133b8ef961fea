"""Page 1, predict / compare: one prediction per GPU, with error bands, the two phases, a roofline chart and
the memory budget."""

from __future__ import annotations

from typing import Any

import infercast
from infercast.errors import InfercastError
from infercast.ui import choices
from infercast.ui.forms import Form, cli_line

FIELDS = ("model", "gpu", "precision", "kv_precision", "engine", "tp", "ep", "input_len", "output_len", "batch")
FIELDS_MORE = ("chunk_size", "stream_token_us")
GIB = 2**30


def _command():
    from infercast.cli.predict_cmd import predict

    return predict


def read(form: Form, max_gpus: int) -> dict[str, Any]:
    """The predict keywords from the form (the API's names), and ``gpus``: the GPUs to compare."""
    model, _ = form.path("model")
    gpus = form.many("gpu", ["h100-sxm"])
    if len(gpus) > max_gpus:
        form.fail("gpu", f"gpu: at most {max_gpus} GPUs at once in the web UI (one prediction each)")
    stream_us = form.number("stream_token_us", None, "--stream-token-us")
    return {
        "model": model or "llama-3.1-8b",
        "gpus": gpus,
        "input_len": form.integer("input_len", 2048, "--input-len"),
        "output_len": form.integer("output_len", 256, "--output-len"),
        "batch": form.integer("batch", 1, "--batch"),
        "tp": form.integer("tp", 1, "--tp"),
        "ep": form.integer("ep", 1, "--ep"),
        "precision": form.get("precision") or None,
        "kv_precision": form.get("kv_precision") or None,
        "engine": form.get("engine") or "vllm",
        "chunk_size": form.integer("chunk_size", None, "--chunk-size"),
        "stream_token_s": None if stream_us is None else stream_us * 1e-6,
    }


def predictions(inputs: dict[str, Any]) -> list[infercast.Prediction]:
    """One :func:`infercast.predict` per GPU (``strict=False``: a GPU it does not fit is shown, marked)."""
    keywords = {k: v for k, v in inputs.items() if k != "gpus"}
    return [infercast.predict(gpu=gpu, strict=False, **keywords) for gpu in inputs["gpus"]]


def _band(d: dict[str, Any], metric: str) -> float | None:
    band = (d.get("error_bands") or {}).get(metric) or {}
    return band.get("typical_pct")


def row(p: infercast.Prediction) -> dict[str, Any]:
    """The comparison table's row (raw values; the template formats them)."""
    d: dict[str, Any] = p.to_dict()
    m = p.memory
    return {
        "gpu": p.gpu,
        "setup": f"{p.precision}/{p.kv_precision} · tp{p.tp}" + (f" ep{p.ep}" if p.ep > 1 else "") + f" · {p.engine}",
        "ttft_ms": p.ttft_s * 1e3,
        "ttft_band": _band(d, "ttft"),
        "tpot_ms": p.tpot_s * 1e3,
        "tpot_band": _band(d, "tpot"),
        "itl_ms": p.itl_s * 1e3,
        "e2e_s": float(d.get("e2e_s", 0.0)),
        "out_tok_s": p.output_throughput_tok_s,
        "total_tok_s": p.total_throughput_tok_s,
        "fits": m.fits,
        "max_concurrency": int(d["memory"]["max_concurrency"]),  # at this request's context
        "max_context": m.max_context(p.batch) if m.weights_fit else 0,  # per request, at this batch
        "bounds": f"{p.prefill.bound} / {p.decode.bound}",
        "warnings": list(d.get("warnings") or []),
    }


def explain(p: infercast.Prediction) -> dict[str, Any]:
    """The two-phase explanation of one prediction and its 'what would help' list."""
    phases = []
    for ph in (p.prefill, p.decode):
        d: dict[str, Any] = ph.to_dict() if hasattr(ph, "to_dict") else dict(ph.__dict__)
        shares = sorted(d.get("time_share_by_group", {}).items(), key=lambda kv: -kv[1])[:4]
        phases.append(
            {
                "name": d["name"],
                "time_ms": d["time_s"] * 1e3,
                "steps": d["steps"],
                "bound": d["bound"],
                "ai": d["arithmetic_intensity"],
                "ridge": d["ridge_point"],
                "tflops": d["achieved_tflops_per_gpu"],
                "tb_s": d["achieved_bandwidth_tb_s_per_gpu"],
                "shares": shares,
            }
        )
    return {"gpu": p.gpu, "phases": phases, "advice": list(p.advice)}


def roofline(preds: list[infercast.Prediction]) -> dict[str, Any]:
    """Plotly figure: each GPU's roofline (peak FLOP/s and HBM bandwidth) and its prefill and decode points."""
    traces: list[dict[str, Any]] = []
    for i, p in enumerate(preds):
        hw = infercast.get_hardware(p.gpu)
        bw = hw.memory.bandwidth_bytes_s
        ridge = p.decode.ridge_point
        peak = ridge * bw / 1e12
        xs = [0.5, ridge, max(4 * ridge, 4 * p.prefill.arithmetic_intensity)]
        color = PALETTE[i % len(PALETTE)]
        traces.append(
            {"x": xs, "y": [xs[0] * bw / 1e12, peak, peak], "mode": "lines", "name": f"{p.gpu} roof"}
            | {"line": {"color": color, "width": 2}}
        )
        for ph, symbol in ((p.prefill, "circle"), (p.decode, "diamond")):
            traces.append(
                {
                    "x": [ph.arithmetic_intensity],
                    "y": [ph.achieved_tflops_per_gpu],
                    "mode": "markers",
                    "name": f"{p.gpu} {ph.name}",
                    "marker": {"color": color, "size": 12, "symbol": symbol},
                }
            )
    layout = {
        "xaxis": {"type": "log", "dtick": 1, "title": {"text": "arithmetic intensity (FLOP/byte)"}},
        "yaxis": {"type": "log", "dtick": 1, "title": {"text": "TFLOP/s per GPU"}},
        "margin": {"t": 30, "r": 10},
        "legend": {"orientation": "h", "y": -0.25},
    }
    return {"data": traces, "layout": layout}


PALETTE = ("#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#2c7a7b", "#975a16", "#4a5568")
PARTS = (
    ("weights", "weights_bytes", "#2b6cb0"),
    ("KV cache", "kv_cache_bytes", "#38a169"),
    ("activations", "activation_bytes", "#dd6b20"),
    ("runtime", "runtime_overhead_bytes", "#718096"),
)


def memory_chart(preds: list[infercast.Prediction]) -> dict[str, Any]:
    """Plotly figure: per-GPU memory as a stacked bar (weights, this batch's KV, activations, runtime, and the
    free rest of the capacity, which the KV pool can take), labelled with the max concurrency and context."""
    names = [p.gpu for p in preds]
    data: list[dict[str, Any]] = [
        {"type": "bar", "name": label, "x": names, "y": [getattr(p.memory, attr) / GIB for p in preds]}
        | {"marker": {"color": color}}
        for label, attr, color in PARTS
    ]
    free = [max(0.0, p.memory.capacity_bytes - p.memory.total_bytes) / GIB for p in preds]
    labels = []
    for p in preds:
        r = row(p)
        labels.append(f"{p.memory.capacity_bytes / GIB:.0f} GiB · max {r['max_concurrency']:,} requests")
    data.append(
        {"type": "bar", "name": "free (KV pool headroom)", "x": names, "y": free, "text": labels}
        | {"textposition": "outside", "marker": {"color": "#e2e8f0", "line": {"color": "#a0aec0", "width": 1}}}
    )
    layout = {"barmode": "stack", "yaxis": {"title": {"text": "GiB per GPU"}}, "margin": {"t": 30, "r": 10}}
    layout["legend"] = {"orientation": "h", "y": -0.2}
    return {"data": data, "layout": layout}


def cli_lines(inputs: dict[str, Any], model_name: str) -> str:
    """The equivalent ``infercast predict`` commands, one per GPU."""
    lines = []
    for gpu in inputs["gpus"]:
        options = [
            ("--model", model_name),
            ("--gpu", gpu),
            ("--input-len", inputs["input_len"]),
            ("--output-len", inputs["output_len"]),
            ("--batch", inputs["batch"] if inputs["batch"] != 1 else None),
            ("--tp", inputs["tp"] if inputs["tp"] != 1 else None),
            ("--ep", inputs["ep"] if inputs["ep"] != 1 else None),
            ("--precision", inputs["precision"]),
            ("--kv-precision", inputs["kv_precision"]),
            ("--engine", inputs["engine"] if inputs["engine"] != "vllm" else None),
            ("--chunk-size", inputs["chunk_size"]),
        ]
        if inputs["stream_token_s"] is not None:
            options.append(("--stream-token-us", f"{inputs['stream_token_s'] * 1e6:g}"))
        lines.append(cli_line("predict", options))
    return "\n".join(lines)


def render(form: Form, state: Any) -> dict[str, Any]:
    """The page's template context."""
    inputs = read(form, state.limits.gpus)
    _, model_name = form.path("model")
    context: dict[str, Any] = {
        "choices": choices,
        "inputs": inputs,
        "model_name": model_name or inputs["model"],
        "cli": cli_lines(inputs, model_name or inputs["model"]),
        "result": None,
    }
    if not form.submitted or form.errors:
        return context
    try:
        preds = predictions(inputs)
    except InfercastError as exc:
        form.library_error(exc, _command(), (*FIELDS, *FIELDS_MORE))
        return context
    context["result"] = {
        "rows": [row(p) for p in preds],
        "explain": [explain(p) for p in preds],
        "roofline": roofline(preds),
        "memory": memory_chart(preds),
    }
    return context
