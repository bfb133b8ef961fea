"""The roofline picture: where a scenario's prefill and decode sit against each GPU's two ceilings.

Each GPU contributes a log-log roofline — attainable FLOP/s = min(dense peak, HBM bandwidth x arithmetic
intensity) — with the ridge (peak / bandwidth) marked, and two points from :func:`predict`: prefill and
decode at their arithmetic intensity (FLOP per HBM byte, per GPU) and achieved FLOP/s per GPU. Prefill
lands right of the ridge (compute-bound), decode far left of it (memory-bound); the gap between a point and
the roof is the efficiency lost to kernels, overheads and communication.

Drawing uses matplotlib's object-oriented API on an Agg canvas (no pyplot state, no display needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from infercast.analysis.compare import split_refs, unsupported_note
from infercast.analysis.report import PhaseReport
from infercast.analysis.scenario import predict
from infercast.errors import InfercastError
from infercast.specs.catalog import get_hardware, get_model
from infercast.specs.deployment import Deployment, default_precision
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.precision import get_scheme

FORMATS = {".png": "png", ".svg": "svg"}
_BOX = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def roofline_data(
    gpus: str | Sequence[str | HardwareSpec],
    model: str | ModelSpec,
    *,
    input_len: int,
    output_len: int,
    batch: int = 1,
    precision: str | None = None,
    tp: int = 1,
    ep: int = 1,
    kv_precision: str | None = None,
    engine: str = "vllm",
) -> dict[str, object]:
    """The numbers :func:`plot_roofline` draws, per GPU: roof, ridge and the two phase points.

    FLOP/s are per GPU in FLOP/s (not TFLOP/s), bandwidth in bytes/s, intensity in FLOP/byte. A precision a
    GPU cannot run is listed under ``skipped`` with the reason rather than raising (unless every GPU is
    skipped). Configurations that do not fit in memory are still placed, with ``fits`` False.
    """
    spec = get_model(model)
    names = split_refs("gpus", gpus)
    entries: list[dict[str, object]] = []
    skipped: list[dict[str, str]] = []
    for name in names:
        hw = get_hardware(name)
        scheme = get_scheme(precision if precision is not None else default_precision(spec, hw))
        note = unsupported_note(scheme, hw)
        if note is not None:
            skipped.append({"gpu": hw.id, "precision": scheme.name, "reason": note})
            continue
        dep = Deployment.resolve(
            spec, hw, tp=tp, ep=ep, precision=scheme.name, kv_precision=kv_precision, engine=engine
        )
        p = predict(dep, input_len=input_len, output_len=output_len, batch=batch, strict=False)
        key = p.prefill.compute_key  # the rate the GEMMs run at; the phase reports' ridge is at this peak
        peak, bw = hw.peak(key), hw.memory.bandwidth_bytes_s
        points = {phase.name: _phase_point(phase, peak, bw) for phase in (p.prefill, p.decode)}
        entries.append(
            {
                "gpu": hw.id,
                "name": hw.name,
                "precision": p.precision,
                "kv_precision": p.kv_precision,
                "compute_key": key,
                "peak_flops": peak,
                "bandwidth_bytes_s": bw,
                "ridge_point": p.prefill.ridge_point,
                "fits": bool(p.memory.fits),
                "points": points,
            }
        )
    if not entries:
        raise InfercastError(skipped[0]["reason"], field="precision")
    return {
        "model": spec.id,
        "input_len": input_len,
        "output_len": output_len,
        "batch": batch,
        "tp": tp,
        "ep": ep,
        "engine": engine,
        "gpus": entries,
        "skipped": skipped,
    }


def plot_roofline(
    gpus: str | Sequence[str | HardwareSpec],
    model: str | ModelSpec,
    *,
    path: str | Path = "roofline.png",
    **scenario: Any,
) -> Path:
    """Draw the rooflines of ``gpus`` with the scenario's prefill and decode points; write PNG or SVG.

    ``scenario`` takes the keyword arguments of :func:`roofline_data` (``input_len``, ``output_len``, ``batch``,
    ``precision``, ``tp``, ``ep``, ``kv_precision``, ``engine``). The format follows the extension of ``path``
    (``.png`` or ``.svg``, checked before anything is predicted); missing folders are created. Returns the
    path written.
    """
    image_format(path)
    return save_roofline(roofline_data(gpus, model, **scenario), path)


def save_roofline(data: dict[str, object], path: str | Path) -> Path:
    """Draw a :func:`roofline_data` result and write it as PNG or SVG (by the extension of ``path``).

    Separate from :func:`plot_roofline` so callers that also report the numbers predict only once.
    """
    path = Path(path)
    fmt = image_format(path)
    fig = _draw(data)
    from infercast.files import atomic_path

    with atomic_path(path, "out") as tmp:  # all or nothing: never a half-written image
        fig.savefig(tmp, format=fmt, dpi=150)
    return path


def image_format(path: str | Path) -> str:
    """'png' or 'svg' from the extension of ``path``, or an ``out`` error."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InfercastError(f"must end in .png or .svg, got {str(path)!r}", field="out")
    from infercast.files import check_output_file

    check_output_file(path, "out", create_parents=True)  # before any prediction is made
    return fmt


def _phase_point(phase: PhaseReport, peak: float, bandwidth: float) -> dict[str, object]:
    """Where one phase sits: its intensity, achieved and attainable FLOP/s per GPU, time and binding ceiling."""
    return {
        "arithmetic_intensity": phase.arithmetic_intensity,
        "achieved_flops_per_gpu": phase.achieved_tflops_per_gpu * 1e12,
        "attainable_flops_per_gpu": min(peak, bandwidth * phase.arithmetic_intensity),
        "time_s": phase.time_s,
        "bound": phase.bound,
    }


def _draw_points(ax: Any, e: dict, i: int, colour: str) -> None:
    """One GPU's prefill and decode markers, labelled with intensity, achieved rate and binding ceiling."""
    for phase, marker in (("prefill", "o"), ("decode", "s")):
        pt = e["points"][phase]
        ai, ach = pt["arithmetic_intensity"], pt["achieved_flops_per_gpu"] / 1e12
        if ai <= 0 or ach <= 0:
            continue
        ax.plot([ai], [ach], marker=marker, ms=10, color=colour, mec="black", ls="none")
        label = f"{e['gpu']} {phase}: AI {_num(ai)}, {_num(ach)} TFLOP/s ({pt['bound']})"
        if not e["fits"]:
            label += " [does not fit]"
        dy = -28 - 15 * i if phase == "prefill" else 12 + 15 * i
        ax.annotate(
            label,
            (ai, ach),
            xytext=(-8 if phase == "prefill" else 8, dy),
            textcoords="offset points",
            fontsize=8,
            color=colour,
            ha="right" if phase == "prefill" else "left",
            bbox=_BOX,
            arrowprops={"arrowstyle": "-", "color": colour, "lw": 0.6},
        )


def _draw(data: dict[str, object]):  # -> matplotlib.figure.Figure (imported lazily)
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    entries: list[dict] = data["gpus"]  # type: ignore[assignment]
    ais = [pt["arithmetic_intensity"] for e in entries for pt in e["points"].values() if pt["arithmetic_intensity"] > 0]
    ridges = [e["ridge_point"] for e in entries]
    x_lo = 10 ** np.floor(np.log10(min([*ais, *ridges]) / 3))
    x_hi = 10 ** np.ceil(np.log10(max([*ais, *ridges]) * 3))
    achieved = [pt["achieved_flops_per_gpu"] for e in entries for pt in e["points"].values()]
    y_hi = max(e["peak_flops"] for e in entries) * 3 / 1e12
    y_lo = 10 ** np.floor(np.log10(max(min(a for a in achieved if a > 0) / 1e12 / 3, 1e-6)))

    fig = Figure(figsize=(9, 6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    x = np.geomspace(x_lo, x_hi, 400)
    n = len(entries)
    for i, e in enumerate(entries):
        colour = _COLOURS[i % len(_COLOURS)]
        peak_t, bw = e["peak_flops"] / 1e12, e["bandwidth_bytes_s"]
        ax.plot(
            x,
            np.minimum(peak_t, bw * x / 1e12),
            color=colour,
            lw=2,
            label=f"{e['gpu']}: {e['compute_key']} peak {peak_t:,.0f} TFLOP/s, HBM {bw / 1e12:.2f} TB/s",
        )
        ridge = e["ridge_point"]
        ax.plot([ridge, ridge], [y_lo, peak_t], color=colour, ls=":", lw=1)
        ax.plot([ridge], [peak_t], marker="D", ms=8, color=colour, mec="black", ls="none")
        ax.annotate(
            f"ridge {ridge:.0f}",
            (ridge, peak_t),
            xytext=(4, 6 + 12 * (n - 1 - i)),
            textcoords="offset points",
            fontsize=8,
            color=colour,
            ha="right",
            bbox=_BOX,
        )
        _draw_points(ax, e, i, colour)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("Arithmetic intensity (FLOP per HBM byte, per GPU)")
    ax.set_ylabel("TFLOP/s per GPU (roof: attainable; markers: achieved)")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.08)
    prec = ", ".join(sorted({e["precision"] for e in entries}))
    ax.set_title(
        f"Roofline: {data['model']} ({prec}), prompt {data['input_len']:,}, output {data['output_len']:,}, "
        f"batch {data['batch']}" + (f", tp {data['tp']}" if data["tp"] != 1 else ""),
        fontsize=11,
    )
    roofs = ax.legend(loc="upper left", fontsize=8, title="roof per GPU", title_fontsize=8)
    ax.add_artist(roofs)
    keys = [
        Line2D([], [], marker="o", color="grey", mec="black", ls="none", ms=8, label="prefill"),
        Line2D([], [], marker="s", color="grey", mec="black", ls="none", ms=8, label="decode"),
        Line2D([], [], marker="D", color="grey", mec="black", ls="none", ms=7, label="ridge (peak / bandwidth)"),
    ]
    ax.legend(handles=keys, loc="lower right", fontsize=8)
    return fig


def _num(v: float) -> str:
    """Compact label numbers: 795, 614, 2.27, 1.06."""
    return f"{v:,.0f}" if v >= 10 else f"{v:.3g}"
