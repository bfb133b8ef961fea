"""Pareto plot of a plan: output tokens/s per GPU vs tokens/s per user, and $/Mtok vs p99 E2E latency, every
passing candidate at its max rate, fronts joined, the chosen one starred (PNG or SVG, matplotlib Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.analysis.roofline_plot import image_format
from infercast.errors import InfercastError
from infercast.plan.result import PlanResult

MAX_LABELS = 6
"""Front points labelled per panel (evenly spaced along the front; the rest stay unlabelled to keep it legible)."""


VIEWS = (
    (
        "tok_s_per_user",
        "output_tok_s_per_gpu",
        "pareto_throughput",
        "interactivity: tokens/s per user (1 / median TPOT)",
        "throughput: output tokens/s per GPU",
        "upper right is better",
    ),
    (
        "e2e_p99_s",
        "usd_per_mtok_output",
        "pareto_cost",
        "p99 end-to-end latency (s)",
        "$ per million output tokens",
        "lower left is better",
    ),
)
"""The two panels: x column, y column, front column, x label, y label, which corner is better."""
MODES = {"agg": ("o", "aggregated"), "disagg": ("s", "disaggregated")}


def save_pareto(result: PlanResult, path: str | Path) -> Path:
    """Write the two-panel Pareto plot of ``result`` to ``path`` (.png or .svg)."""
    from matplotlib.figure import Figure

    path = Path(path)
    fmt = image_format(path)
    ok = result.passing
    if ok.empty:
        raise InfercastError("no candidate passes the SLOs: nothing to plot", field="plot")
    fig = Figure(figsize=(12, 5), layout="constrained")
    panels = fig.subplots(1, 2)
    chosen = result.chosen["label"] if result.chosen else None
    for ax, view in zip(panels, VIEWS, strict=True):
        _panel(ax, ok, view, chosen)
    s = result.settings
    fig.suptitle(f"Plan: {s['model']}, {s['traffic']}; SLO {s['slo_text']}", fontsize=11)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format=fmt, dpi=130)
    return path


def _panel(ax: Any, ok: pd.DataFrame, view: tuple[str, ...], chosen: str | None) -> None:
    """One panel: every passing candidate by mode, the front joined and labelled, the chosen one starred."""
    xcol, ycol, front_col, xlabel, ylabel, hint = view
    for mode, (marker, label) in MODES.items():
        sub = ok[ok["mode"] == mode]
        if not sub.empty:
            ax.scatter(
                sub[xcol].astype(float),
                sub[ycol].astype(float),
                marker=marker,
                s=22,
                alpha=0.45,
                color="tab:gray",
                label=f"{label} (passes)",
            )
    front = ok[ok[front_col]].sort_values(xcol)
    ax.plot(
        front[xcol].astype(float), front[ycol].astype(float), "-o", color="tab:blue", ms=5, lw=1.5, label="Pareto front"
    )
    shown = front.iloc[np.unique(np.linspace(0, len(front) - 1, min(len(front), MAX_LABELS)).round().astype(int))]
    for r in shown.itertuples(index=False):
        ax.annotate(
            r.label,
            (float(getattr(r, xcol)), float(getattr(r, ycol))),
            fontsize=6.5,
            xytext=(4, 4),
            textcoords="offset points",
            color="tab:blue",
        )
    if chosen is not None:
        row = ok[ok["label"] == chosen].iloc[0]
        ax.scatter(
            [float(row[xcol])],
            [float(row[ycol])],
            marker="*",
            s=260,
            color="tab:red",
            zorder=5,
            edgecolor="black",
            label=f"chosen: {chosen}",
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(hint, fontsize=9, color="dimgray")
    ax.grid(True, alpha=0.25)
    ax.legend(fontsize=7, loc="best")
    _log_scale_if_wide(ax, ok[ycol].astype(float).to_numpy())


def _log_scale_if_wide(ax: Any, values: np.ndarray) -> None:
    """A log y axis, plainly labelled, when the values span more than 30x."""
    from matplotlib.ticker import FuncFormatter

    if np.nanmax(values) / max(np.nanmin(values), 1e-12) > 30:
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.tick_params(axis="y", which="minor", labelsize=7)
