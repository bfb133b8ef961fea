"""The ``torch`` engine (infercast's own PyTorch harness) fitted to the harness timed on real GPUs (data/harness/).

The harness runs its layers unfused, about six kernels for each one the operator table counts (a dispatch trace
of Llama-3.2-1B gives 59-61 kernels per layer, Qwen3-8B 75-77, against the table's 11:
benchmarks/harness_kernel_count.py). Its prefill runs eagerly, launched op by op from Python, and its decode
steps replay CUDA graphs. So only the engine's
overheads are fitted: the extra time per layer of a graph-replayed step and of an eager one
(``layer_overhead_*``), and the per-step time. The GPU's kernel parameters stay as installed: the harness's
unfused layers must not move them (data/harness/h100-sxm/README.md). Only whole steps and requests are fitted.
The single-kernel rows test the GPU's parameters (benchmarks/harness_h100.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

from infercast.calibrate.profile_fit import CPU_LABEL, FitResult, fit
from infercast.calibrate.validation import compare
from infercast.records.record import Record
from infercast.specs.catalog import get_model

ENGINE = "torch"
HEADER = "# The torch engine's overheads: fitted to infercast's harness on real GPUs (data/harness/, 'harness_fit')."
KINDS = ("prefill_step", "decode_step", "ttft", "tpot")
PARAMETERS = tuple(f"{ENGINE}:{p}" for p in ("layer_overhead_graph_s", "layer_overhead_eager_s", "step_overhead_s"))
"""What the fit moves: the unfused layers' extra time (graph and eager) and the per-step time. The launch cost of
one kernel stays at its prior, measured by the harness's launch_overhead rows, so single-kernel rows keep it."""


SAME_TOKEN_BEFORE = "2026-11-26T21:00:00+00:00"
"""Graph-replayed decode steps timed before this (UTC) fed token 0 to every sequence of the batch over an empty
KV cache (fixed in ``harness/runner.py`` on 2026-11-26): identical hidden states, so a MoE layer routed the whole
batch like one token, to k experts instead of the E·(1 − (1 − k/E)^T) a served batch touches."""


def same_token_moe_step(rec: Record) -> bool:
    """A MoE decode step of more than one sequence timed with the same token in every sequence (see
    :data:`SAME_TOKEN_BEFORE`): it times a routing no served batch has, so the fit and its error leave it out."""
    return (
        rec.kind == "decode_step"
        and rec.batch > 1
        and rec.notes == "cuda_graph"
        and "" < rec.timestamp < SAME_TOKEN_BEFORE
        and get_model(rec.model).moe is not None
    )


def harness_rows(records: Sequence[Record]) -> list[Record]:
    """The rows the fit uses: whole steps and requests of the harness on a GPU (not the same-token MoE steps)."""
    return [
        r
        for r in records
        if r.engine == ENGINE and r.kind in KINDS and r.gpu.strip().lower() != CPU_LABEL and not same_token_moe_step(r)
    ]


def fit_harness(records: Sequence[Record], source: str = "") -> FitResult:
    """The torch engine's overheads on the harness's step and request rows, the installed kernel profiles fixed."""
    return fit(harness_rows(records), parameters=PARAMETERS, source=source, base="kernels")


BAND_KINDS = {"ttft": ("ttft", "prefill_step"), "tpot": ("tpot", "decode_step")}
"""Rows behind each metric's error band: a prompt's first token (eager prefill), and a decode step."""


def held_out_errors(records: Sequence[Record]) -> list[tuple[Record, float]]:
    """Each row's relative error when predicted by a fit without its model (leave one model out)."""
    rows = harness_rows(records)
    out: list[tuple[Record, float]] = []
    for model in sorted({r.model for r in rows}):
        result = fit_harness([r for r in rows if r.model != model])
        mine = [r for r in rows if r.model == model]
        out += [(c.record, c.error) for c in compare(mine, result.profiles())]
    return out


def summarize_held_out(errors: Sequence[tuple[Record, float]]) -> dict[str, object]:
    """Median |error| per model and over all, and each metric's error band (median, p90, points)."""
    absolute = np.abs([e for _, e in errors])
    models = sorted({r.model for r, _ in errors})
    by_model = {m: float(np.median([abs(e) for r, e in errors if r.model == m])) for m in models}
    bands = {}
    for metric, kinds in BAND_KINDS.items():
        mine = np.abs([e for r, e in errors if r.kind in kinds])
        if mine.size:
            bands[metric] = {
                "typical": round(float(np.median(mine)), 4),
                "p90": round(float(np.percentile(mine, 90)), 4),
                "points": int(mine.size),
            }
    return {
        "by_model": {k: round(v, 4) for k, v in by_model.items()},
        "all": round(float(np.median(absolute)), 4),
        "bands": bands,
    }


def write_harness_fit(result: FitResult, held_out: dict[str, object], path: Path, source: str) -> None:
    """Merge the torch engine's fitted values into ``engine_load.yaml`` (other engines' values kept), with the rows
    it was fitted on and its error in-sample and leaving one model out (:func:`summarize_held_out`, whose bands
    ``predict`` prints for the torch engine)."""
    data = yaml.safe_load(path.read_text()) if path.is_file() else {}
    data = data or {}
    data.setdefault("engines", {}).setdefault(ENGINE, {}).update(
        {k.split(":", 1)[1]: float(f"{v:.5g}") for k, v in result.values.items()}
    )
    before, after = (float(np.median(np.abs(np.expm1(e)))) for e in (result.before, result.after))
    data["harness_fit"] = {
        "source": source,
        "engine": ENGINE,
        "kinds": list(KINDS),
        "points": len(result.records),
        "parameters": list(PARAMETERS),
        "median_abs_error": {"priors": round(before, 4), "fitted": round(after, 4)},
        "held_out": held_out,
    }
    text = path.read_text() if path.is_file() else ""
    header = [line for line in text.splitlines() if line.startswith("#")]
    if HEADER not in header:
        header.append(HEADER)
    path.write_text("".join(line + "\n" for line in header) + yaml.safe_dump(data, sort_keys=False))
