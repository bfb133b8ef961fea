"""Matplotlib figures of a simulation: latency CDFs, a timeline, and latency against request rate.

Every function renders off-screen (the Agg backend, no display needed), writes the figure to ``path`` (the
format follows the extension: .png, .svg, .pdf) and returns the path.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from infercast.display import fmt_time
from infercast.errors import InfercastError
from infercast.sim.labels import run_label
from infercast.sim.metrics import SLO

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from infercast.sim.api import SimulationResult

_FORMATS = {".png", ".svg", ".pdf"}
_DPI = 120
_SWEEP_COLUMNS = ("rate_req_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "goodput_req_s", "saturated")


def _figure(nrows: int, ncols: int, size: tuple[float, float], **kwargs: Any) -> tuple[Figure, Any]:
    """A figure on the Agg canvas (not registered with pyplot, so nothing leaks between calls)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig, axes


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in _FORMATS:
        raise InfercastError(f"unsupported image format {path.suffix!r}; use .png, .svg or .pdf", field="path")
    from infercast.files import atomic_path

    with atomic_path(path, "plot_dir") as tmp:  # all or nothing: never a half-written image
        fig.savefig(tmp, dpi=_DPI, format=path.suffix.lower().lstrip("."))
    return path


def _no_data(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


# --------------------------------------------------------------------------------------------- latency CDFs


def plot_latency_cdfs(result: SimulationResult, path: str | Path) -> Path:
    """Empirical CDFs of TTFT, TPOT and end-to-end latency (ms, log x) with p50 and p99 marked."""
    df = result.requests()
    fig, axes = _figure(1, 3, (13.5, 4.2))
    panels = (("ttft_s", "TTFT", "C0"), ("tpot_s", "TPOT", "C1"), ("e2e_s", "E2E latency", "C2"))
    for ax, (column, label, color) in zip(axes[0], panels, strict=True):
        values = df[column].to_numpy(dtype=float)
        values = np.sort(values[np.isfinite(values) & (values > 0)])
        if values.size == 0:
            _no_data(ax, f"{label} values")
            ax.set_title(label)
            continue
        unit, scale = ("s", 1.0) if np.median(values) >= 1.0 else ("ms", 1e3)
        x = values * scale
        y = np.arange(1, x.size + 1) / x.size
        ax.step(x, y, where="post", color=color, lw=1.8, label=f"{label} (n={x.size:,})")
        ax.set_xscale("log")
        lo, hi = x[0], x[-1]
        if hi / lo < 4:  # a narrow spread: widen the log axis so it shows a few labelled ticks
            mid = math.sqrt(lo * hi)
            ax.set_xlim(mid / 2.5, mid * 2.5)
        _log_ticks(ax)
        for q, style in ((50, "--"), (99, ":")):
            v = float(np.percentile(values, q))
            ax.axvline(v * scale, color="0.25", ls=style, lw=1.1, label=f"p{q} = {fmt_time(v)}")
            ax.plot([v * scale], [q / 100], "o", color="0.25", ms=4)
        ax.set_ylim(0, 1.02)
        ax.set_title(label)
        ax.set_xlabel(f"{label} ({unit}, log scale)")
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
        ax.legend(loc="best", fontsize=8)
    axes[0][0].set_ylabel("fraction of requests ≤ x")
    fig.suptitle(f"Latency distributions — {run_label(result.config)}", fontsize=10)
    return _save(fig, path)


def _log_ticks(ax: Axes, axis: str = "x") -> None:
    """Plain-number ticks at 1, 2, 5 × 10^k on a log axis (no 10^k exponents, no overlapping labels)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    target = ax.xaxis if axis == "x" else ax.yaxis
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 1.0
    subs = (1.0,) if decades > 3.5 else (1.0, 2.0, 5.0) if decades > 1.2 else (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)
    target.set_major_locator(LogLocator(base=10, subs=subs))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    target.set_minor_locator(LogLocator(base=10, subs=[float(s) for s in range(1, 10)]))
    target.set_minor_formatter(NullFormatter())


# ------------------------------------------------------------------------------------------------ timeline


def _token_rate(first: np.ndarray, finish: np.ndarray, tokens: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Output tokens per second in each bin: each request's first token at ``first``, the rest spread
    evenly over ``[first, finish]`` (exact integral per bin, O((n + bins) log n))."""
    first, finish, tokens = (np.asarray(a, dtype=float) for a in (first, finish, tokens))
    width = np.diff(edges)
    counts = np.histogram(first, bins=edges, weights=np.minimum(tokens, 1.0))[0]
    rest = np.maximum(tokens - 1.0, 0.0)
    span = finish - first
    flat = span <= 0
    counts += np.histogram(finish[flat], bins=edges, weights=rest[flat])[0]
    s, e, r = first[~flat], finish[~flat], rest[~flat] / span[~flat]

    def integral(points: np.ndarray) -> np.ndarray:
        # Σ_i r_i · (min(t, e_i) − min(t, s_i)) evaluated at every t in ``points``
        def part(bounds: np.ndarray) -> np.ndarray:
            order = np.argsort(bounds)
            b, w = bounds[order], r[order]
            cum_bw = np.concatenate([[0.0], np.cumsum(b * w)])
            cum_w = np.concatenate([[0.0], np.cumsum(w)])
            k = np.searchsorted(b, points, side="right")
            return cum_bw[k] + points * (cum_w[-1] - cum_w[k])

        return part(e) - part(s)

    if s.size:
        counts += np.diff(integral(edges))
    return counts / width


def plot_timeline(result: SimulationResult, path: str | Path, *, bin_s: float | None = None) -> Path:
    """Throughput, KV-cache occupancy and running/waiting sequences over simulated time (one subplot each).

    Throughput: output tokens/s (each request's tokens spread over its decode) and completed requests/s
    (binned by finish time), in bins of ``bin_s`` seconds (default: about 100 bins over the run).
    """
    df = result.requests()
    occ = result.occupancy()
    done = df[np.isfinite(df["finish_s"])]
    end = float(done["finish_s"].max()) if len(done) else 0.0
    if not occ.empty:
        end = max(end, float(occ["t"].max()))
    start = 0.0  # the benchmark start (arrival times are >= 0), as the summary's duration counts it
    if bin_s is not None and not bin_s > 0:
        raise InfercastError(f"must be > 0, got {bin_s}", field="bin_s")
    fig, axes = _figure(3, 1, (11, 8.6), sharex=True)
    ax_tp, ax_kv, ax_q = axes[:, 0]
    if len(done) and end > start:
        _plot_throughput(ax_tp, done, start, end, bin_s)
    else:
        _no_data(ax_tp, "completed requests")
    if occ.empty:
        _no_data(ax_kv, "occupancy samples (simulate with sample_interval > 0)")
        _no_data(ax_q, "occupancy samples")
    else:
        _plot_occupancy(ax_kv, ax_q, occ, result.config.get("kv_blocks_per_replica") or 0)
    for ax in (ax_tp, ax_kv, ax_q):
        ax.grid(True, alpha=0.25)
    ax_q.set_xlabel("simulated time (s)")
    if end > start:
        ax_q.set_xlim(start, end)
    fig.suptitle(f"Timeline — {run_label(result.config)}", fontsize=10)
    return _save(fig, path)


def _plot_throughput(ax_tp: Axes, done: pd.DataFrame, start: float, end: float, bin_s: float | None) -> None:
    """Output tokens/s (left axis) and completed requests/s (right axis) of the finished requests ``done``."""
    width = bin_s or _nice_bin((end - start) / 100)
    edges = np.arange(start, end + width, width)
    if edges.size < 2:
        edges = np.array([start, start + width])
    tok = _token_rate(
        done["first_token_s"].to_numpy(), done["finish_s"].to_numpy(), done["output_tokens"].to_numpy(), edges
    )
    req = np.histogram(done["finish_s"].to_numpy(), bins=edges)[0] / width
    ax_tp.stairs(tok, edges, color="C0", lw=1.6, label="output tokens/s (left)")
    ax_tp.set_ylabel("output tokens/s")
    ax_tp.set_ylim(bottom=0)
    ax_req = ax_tp.twinx()
    ax_req.stairs(req, edges, color="C3", lw=0.9, alpha=0.55, label="completed requests/s (right)")
    ax_req.set_ylabel("completed requests/s")
    ax_req.set_ylim(bottom=0)
    h1, l1 = ax_tp.get_legend_handles_labels()
    h2, l2 = ax_req.get_legend_handles_labels()
    ax_tp.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    ax_tp.set_title(f"Throughput ({_fmt_bin(width)} bins)", fontsize=10)


def _plot_occupancy(ax_kv: Axes, ax_q: Axes, occ: pd.DataFrame, total: int) -> None:
    """KV blocks in use (% of ``total`` blocks per replica when known) and running / waiting sequences, per
    replica, from the occupancy samples ``occ``."""
    replicas = sorted(occ["replica"].unique())
    many = len(replicas) > 4
    for i, rep in enumerate(replicas):
        g = occ[occ["replica"] == rep].sort_values("t")
        t = g["t"].to_numpy()
        tag = "" if len(replicas) == 1 else f"replica {rep}"
        kw: dict[str, Any] = {"drawstyle": "steps-post", "lw": 0.8 if many else 1.4}
        if many:
            kw["alpha"] = 0.6
        if total:
            ax_kv.plot(
                t,
                100.0 * g["kv_blocks"].to_numpy() / total,
                color=f"C{i % 10}",
                label=(tag or "KV blocks in use") if not many or i == 0 else None,
                **kw,
            )
        else:
            ax_kv.plot(t, g["kv_blocks"].to_numpy(), color=f"C{i % 10}", label=tag or None, **kw)
        ax_q.plot(
            t,
            g["running"].to_numpy(),
            color="C2" if len(replicas) == 1 else f"C{i % 10}",
            label=f"running{' · ' + tag if tag else ''}" if not many or i == 0 else None,
            **kw,
        )
        ax_q.plot(
            t,
            g["waiting"].to_numpy(),
            color="C1" if len(replicas) == 1 else f"C{i % 10}",
            ls="--",
            label=f"waiting{' · ' + tag if tag else ''}" if not many or i == 0 else None,
            **kw,
        )
    if total:
        peak = 100.0 * float(occ["kv_blocks"].max()) / total
        ax_kv.set_ylabel("KV cache in use (%)")
        ax_kv.set_ylim(0, min(105.0, max(5.0, peak * 1.25)))
        ax_kv.set_title(f"KV-cache occupancy (% of {total:,} blocks per replica; peak {peak:.1f}%)", fontsize=10)
    else:
        ax_kv.set_ylabel("KV blocks in use")
        ax_kv.set_title("KV-cache occupancy", fontsize=10)
    from matplotlib.ticker import MaxNLocator

    ax_q.set_ylabel("sequences")
    ax_q.set_ylim(bottom=0)
    ax_q.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_q.set_title(
        "Running (in the batch) and waiting (queued) sequences"
        + (" — solid: running, dashed: waiting" if len(replicas) > 1 else ""),
        fontsize=10,
    )
    ax_kv.legend(loc="upper left", fontsize=8)
    ax_q.legend(loc="upper left", fontsize=8, ncol=2 if len(replicas) > 1 else 1)


def _nice_bin(seconds: float) -> float:
    """Round a bin width up to 1, 2 or 5 × 10^k seconds."""
    if seconds <= 0:
        return 1.0
    exp = math.floor(math.log10(seconds))
    for m in (1, 2, 5, 10):
        if m * 10.0**exp >= seconds:
            return m * 10.0**exp
    return 10.0 ** (exp + 1)


def _fmt_bin(seconds: float) -> str:
    return f"{seconds:g} s" if seconds >= 1 else f"{seconds * 1e3:g} ms"


# ---------------------------------------------------------------------------------------------- rate sweep


def _as_slo(slo: SLO | str | list[str] | None) -> SLO | None:
    if slo is None or isinstance(slo, SLO):
        return slo
    return SLO.parse(slo)


def plot_rate_sweep(
    table: pd.DataFrame,
    path: str | Path,
    slo: SLO | str | list[str] | None = None,
    *,
    slo_capacity: float | None = None,
    saturation_rate: float | None = None,
) -> Path:
    """TTFT and TPOT percentiles (p50, p99) and goodput against request rate.

    ``table``: one row per rate with columns rate_req_s, ttft_p50_s, ttft_p99_s, tpot_p50_s, tpot_p99_s,
    goodput_req_s, saturated (as ``rate_sweep(...).table``). ``slo``: an ``SLO`` or vLLM-style spec
    (``"ttft:200 tpot:50"``), drawn as horizontal lines. ``slo_capacity``: the sweep's SLO capacity
    (``saturation_rate`` is its former name); without it the first rate flagged ``saturated`` is marked.
    Saturated rates are drawn with crosses.
    """
    missing = [c for c in _SWEEP_COLUMNS if c not in table.columns]
    if missing:
        raise InfercastError(f"missing columns {', '.join(missing)}", field="table")
    if table.empty:
        raise InfercastError("no rows to plot", field="table")
    slo_ = _as_slo(slo)
    t = table.sort_values("rate_req_s")
    rate = t["rate_req_s"].to_numpy(dtype=float)
    sat = t["saturated"].to_numpy(dtype=bool)
    saturation_rate = slo_capacity if slo_capacity is not None else saturation_rate
    if saturation_rate is None and sat.any():
        mark, mark_label = float(rate[np.argmax(sat)]), "saturates"
    elif saturation_rate is not None:
        mark, mark_label = float(saturation_rate), "SLO capacity"
    else:
        mark, mark_label = None, ""

    fig, axes = _figure(1, 3, (14, 4.4))
    ax_ttft, ax_tpot, ax_good = axes[0]
    panels = (
        (ax_ttft, "ttft", "TTFT", slo_.ttft_s if slo_ else None),
        (ax_tpot, "tpot", "TPOT", slo_.tpot_s if slo_ else None),
    )
    for ax, key, label, limit in panels:
        for q, color, style in (("p50", "C0", "-"), ("p99", "C3", "--")):
            ms = t[f"{key}_{q}_s"].to_numpy(dtype=float) * 1e3
            ax.plot(rate, ms, style, color=color, marker="o", ms=4, label=f"{label} {q}")
            if sat.any():
                ax.plot(rate[sat], ms[sat], "x", color="k", ms=8, mew=1.6)
        if limit is not None:
            ax.axhline(limit * 1e3, color="C2", lw=1.4, label=f"SLO {fmt_time(limit)}")
        ax.set_yscale("log")
        _log_ticks(ax, "y")
        ax.set_ylabel(f"{label} (ms, log scale)")
        ax.set_title(f"{label} vs request rate", fontsize=10)

    good = t["goodput_req_s"].to_numpy(dtype=float)
    ax_good.plot(rate, good, "-o", color="C4", ms=4, label="goodput" if slo_ else "goodput (= throughput, no SLO)")
    if "request_throughput_req_s" in t.columns and slo_ is not None:
        ax_good.plot(
            rate, t["request_throughput_req_s"].to_numpy(dtype=float), "--", color="C7", lw=1.2, label="throughput"
        )
    top = float(np.nanmax(np.concatenate([rate, good])))
    ax_good.plot([0, top], [0, top], ":", color="0.5", lw=1, label="ideal (served = offered)")
    if sat.any():
        ax_good.plot(rate[sat], good[sat], "x", color="k", ms=8, mew=1.6)
    ax_good.set_ylabel("requests/s")
    ax_good.set_ylim(bottom=0)
    ax_good.set_title("Goodput vs request rate", fontsize=10)

    for ax in axes[0]:
        if mark is not None:
            ax.axvline(mark, color="0.3", ls="-.", lw=1.2, label=f"{mark_label} {mark:.2f} req/s")
        if sat.any():
            ax.plot([], [], "x", color="k", ms=8, mew=1.6, label="saturated (queue grows)")
        ax.set_xlabel("request rate (req/s)")
        ax.set_xlim(left=0)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(loc="upper left" if ax is ax_good else "best", fontsize=8)
    fig.suptitle("Latency and goodput vs offered load" + (f" (SLO {slo_.describe()})" if slo_ else ""), fontsize=10)
    return _save(fig, path)
