"""Side-by-side questions built on :func:`predict` and :func:`sweep`: compare, crossover.

* :func:`compare` puts GPUs (and number formats) next to each other for one scenario, with the ceiling
  each phase hits and ratios against the first configuration, so "TTFT tracks FLOP/s, TPOT tracks
  bandwidth" can be read straight off the table.
* ``select`` ("which GPU meets my latency SLA?") lives in :mod:`infercast.plan.select`: it is the
  capacity planner's analytic screen, so the two never give different answers.
* :func:`crossover` finds the prompt length at which prefill (TTFT) starts to take longer than decoding
  the response — where the dominant phase (and so the hardware spec that matters) switches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from infercast.analysis.scenario import TTFT_DEFINITION, Prediction, check_context, predict
from infercast.analysis.sweep import cost_per_mtok, sweep
from infercast.display import fmt_bytes, fmt_time
from infercast.errors import InfercastError, require_positive_int
from infercast.memory import MemoryBudget, memory_budget
from infercast.specs.catalog import get_hardware, get_model
from infercast.specs.deployment import Deployment, default_precision
from infercast.specs.engine import get_engine
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.precision import PrecisionScheme, get_scheme

__all__ = [
    "compare",
    "crossover",
    "default_precision",
    "differs_in",
    "distinguishable",
    "does_not_fit",
    "split_refs",
    "unsupported_note",
]

# --------------------------------------------------------------------------------------------- helpers


def unsupported_note(scheme: PrecisionScheme, hw: HardwareSpec) -> str | None:
    """None when ``hw`` can run ``scheme``; otherwise the reason :meth:`PrecisionScheme.compute_key` gives
    ("'fp8' computes in fp8 but a100-80gb has no FP8 tensor cores ...; runnable there: ...")."""
    try:
        scheme.compute_key(hw)
    except InfercastError as exc:
        return exc.message
    return None


def split_refs(field: str, values: object) -> list:
    """A name, a comma-separated string or a sequence of names/specs -> list; strings split on commas.

    Spec objects (a :class:`HardwareSpec`, say) pass through untouched. An empty result is an error.
    """
    items = [values] if isinstance(values, str) or not isinstance(values, Sequence) else list(values)
    out: list = []
    for item in items:
        if isinstance(item, str):
            out.extend(part.strip() for part in item.split(",") if part.strip())
        elif item is not None:
            out.append(item)
    if not out:
        raise InfercastError("needs at least one value", field=field)
    return out


def _gb(n: float) -> str:
    """Sizes in reasons and messages: 146 GB, 9.3 GB, 512 MB."""
    return fmt_bytes(n, sig=3)


def _ms(s: float) -> str:
    """Times in reasons and messages: 421 ms, 6.82 ms, 2.17 s, 100 µs."""
    return fmt_time(s, sig=3)


def does_not_fit(mem: MemoryBudget) -> str:
    """'does not fit: needs 146 GB per GPU, has 151 GB (9.3 GB short after the engine's reserve)'."""
    return (
        f"does not fit: needs {_gb(mem.total_bytes)} per GPU, has {_gb(mem.capacity_bytes)} "
        f"({_gb(mem.shortfall_bytes)} short after the engine's reserve)"
    )


# --------------------------------------------------------------------------------------------- compare

_COMPARE_COLUMNS = [
    "gpu",
    "precision",
    "engine",
    "tp",
    "ep",
    "kv_precision",
    "ttft_s",
    "ttft_last_s",
    "tpot_s",
    "ttft_error",
    "tpot_error",
    "e2e_s",
    "output_throughput_tok_s",
    "fits",
    "weights_bytes",
    "memory_bytes",
    "capacity_bytes",
    "prefill_bound",
    "decode_bound",
    "prefill_ai",
    "decode_ai",
    "ridge_point",
    "prefill_tflops_per_gpu",
    "prefill_flops_util",
    "decode_tb_s_per_gpu",
    "decode_bw_util",
    "peak_tflops",
    "hbm_tb_s",
    "cost_per_mtok_usd",
    "ttft_speedup",
    "tpot_speedup",
    "e2e_speedup",
    "throughput_ratio",
    "cost_ratio",
    "peak_flops_ratio",
    "bandwidth_ratio",
    "ttft_distinguishable",
    "tpot_distinguishable",
    "differs_in",
    "note",
]

_TERM_NAMES = {
    "ffn": "FFN GEMM kernels",
    "attention": "attention kernels",
    "communication": "TP collectives",
    "engine overhead": "per-step overhead",
    "norm": "norm kernels",
    "lm_head": "LM-head GEMM",
    "moe": "MoE GEMM kernels",
}
"""How :func:`compare` names the cost terms (operator groups of the cost model) that make two rows differ."""


def distinguishable(a: float, band_a: float, b: float, band_b: float) -> bool:
    """Whether two predictions differ by more than their error bands: their intervals a(1 +- band_a) and
    b(1 +- band_b) do not overlap (a NaN band, none committed, counts as 0)."""
    ea = 0.0 if band_a != band_a else band_a
    eb = 0.0 if band_b != band_b else band_b
    return abs(a - b) > a * ea + b * eb


def _terms(p: Prediction) -> dict[str, dict[str, float]]:
    """Per-request seconds of each cost term of a prediction's TTFT and of one TPOT step (the mean over the
    batch): operator groups, per-request overhead, API front-end, waiting for the rest of the batch's prefill."""
    steps = max(p.output_len - 1, 1)
    ttft = {g: share * p.prefill.time_s for g, share in p.prefill.time_share_by_group.items()}
    ttft["per-request overhead"] = p.ttft_last_s - p.prefill.time_s - p.front_end_s
    ttft["API front-end"] = p.front_end_s
    ttft["the batch's prefill order"] = p.ttft_s - p.ttft_last_s
    tpot = {g: share * p.decode.time_s / steps for g, share in p.decode.time_share_by_group.items()}
    tpot["API front-end"] = p.tpot_last_s - p.itl_s
    tpot["waiting for the batch's prefill"] = p.tpot_s - p.tpot_last_s
    return {"TTFT": ttft, "TPOT": tpot}


def differs_in(base: Prediction, p: Prediction) -> str:
    """Which terms make ``p`` differ from ``base``, largest first: 'TPOT: per-step overhead -0.58 ms, ...;
    TTFT: ...; scheduler inflight vs chunked' (empty when nothing differs by 1 % of the metric)."""
    parts = []
    a, b = _terms(base), _terms(p)
    for metric, value in (("TTFT", base.ttft_s), ("TPOT", base.tpot_s)):
        diff = {k: b[metric].get(k, 0.0) - a[metric].get(k, 0.0) for k in a[metric].keys() | b[metric].keys()}
        big = sorted((kv for kv in diff.items() if abs(kv[1]) > 0.01 * value), key=lambda kv: -abs(kv[1]))[:3]
        if big:
            terms = ", ".join(f"{_TERM_NAMES.get(k, k)} {'+' if d > 0 else '-'}{_ms(abs(d))}" for k, d in big)
            parts.append(f"{metric}: {terms}")
    sched_a, sched_b = get_engine(base.engine).scheduler, get_engine(p.engine).scheduler
    if sched_a != sched_b:
        parts.append(f"scheduler {sched_b} vs {sched_a} (shapes queueing under load, not a static batch: simulate)")
    return "; ".join(parts)


def _compare_row(hw: HardwareSpec, p: Prediction) -> dict[str, object]:
    """One row of :func:`compare` from a prediction on ``hw``."""
    mem, pre, dec = p.memory, p.prefill, p.decode
    bands = p.confidence.bands if p.confidence else {}
    peak = hw.peak(pre.compute_key)
    bw = hw.memory.bandwidth_bytes_s
    fits = bool(mem.fits)
    return {
        "gpu": hw.id,
        "precision": p.precision,
        "engine": p.engine,
        "tp": p.tp,
        "ep": p.ep,
        "kv_precision": p.kv_precision,
        "ttft_s": p.ttft_s,
        "ttft_last_s": p.ttft_last_s,
        "tpot_s": p.tpot_s if p.output_len > 1 else np.nan,  # one token: no TPOT (undefined)
        "ttft_error": bands["ttft"].typical if "ttft" in bands else np.nan,
        "tpot_error": bands["tpot"].typical if "tpot" in bands else np.nan,
        "e2e_s": p.e2e_s,
        "output_throughput_tok_s": p.output_throughput_tok_s,
        "fits": fits,
        "weights_bytes": mem.weights_bytes,
        "memory_bytes": mem.total_bytes,
        "capacity_bytes": mem.capacity_bytes,
        "prefill_bound": pre.bound,
        "decode_bound": dec.bound,
        "prefill_ai": pre.arithmetic_intensity,
        "decode_ai": dec.arithmetic_intensity,
        "ridge_point": pre.ridge_point,
        "prefill_tflops_per_gpu": pre.achieved_tflops_per_gpu,
        "prefill_flops_util": pre.achieved_tflops_per_gpu * 1e12 / peak,
        "decode_tb_s_per_gpu": dec.achieved_bandwidth_tb_s_per_gpu,
        "decode_bw_util": dec.achieved_bandwidth_tb_s_per_gpu * 1e12 / bw,
        "peak_tflops": peak / 1e12,
        "hbm_tb_s": bw / 1e12,
        "cost_per_mtok_usd": cost_per_mtok(hw.price_per_hour_usd, p.gpus, p.output_throughput_tok_s),
        "note": "" if fits else does_not_fit(mem),
    }


def _add_ratios(df: pd.DataFrame, preds: list[Prediction | None], engines: bool) -> None:
    """Ratios to the first predicted row (the baseline), whether each row is distinguishable from it, and what
    differs (:func:`compare`); ``engines``: the rows compare several engines (named in the baseline)."""
    valid = df["ttft_s"].notna()
    if valid.any():
        base = df[valid].iloc[0]
        df["ttft_speedup"] = base["ttft_s"] / df["ttft_s"]
        df["tpot_speedup"] = base["tpot_s"] / df["tpot_s"]
        df["e2e_speedup"] = base["e2e_s"] / df["e2e_s"]
        df["throughput_ratio"] = df["output_throughput_tok_s"] / base["output_throughput_tok_s"]
        df["cost_ratio"] = df["cost_per_mtok_usd"] / base["cost_per_mtok_usd"]
        df["peak_flops_ratio"] = df["peak_tflops"] / base["peak_tflops"]
        df["bandwidth_ratio"] = df["hbm_tb_s"] / base["hbm_tb_s"]
        for metric in ("ttft", "tpot"):
            df[f"{metric}_distinguishable"] = [
                bool(
                    distinguishable(
                        base[f"{metric}_s"], base[f"{metric}_error"], r[f"{metric}_s"], r[f"{metric}_error"]
                    )
                )
                if ok and i != base.name
                else None  # the baseline itself, or a row that could not be predicted
                for i, ok, r in zip(df.index, valid, df.to_dict(orient="records"), strict=True)
            ]
        first = next(p for p in preds if p is not None)
        df["differs_in"] = [differs_in(first, p) if p is not None else "" for p in preds]
        df.attrs["baseline"] = f"{base['gpu']} {base['precision']}" + (f" {base['engine']}" if engines else "")


def compare(
    model: str | ModelSpec,
    gpus: str | Sequence[str | HardwareSpec],
    precisions: str | Sequence[str] | None = None,
    *,
    input_len: int,
    output_len: int,
    batch: int = 1,
    tp: int = 1,
    ep: int = 1,
    kv_precision: str | None = None,
    engine: str | Sequence[str] = "vllm",
) -> pd.DataFrame:
    """One row per (GPU, precision, engine): latencies, throughput, memory fit, phase ceilings, cost, ratios.

    ``ttft_s`` / ``tpot_s`` are means over the batch's requests (``ttft_last_s``: the last request's), as in
    :func:`predict`. ``ttft_distinguishable`` / ``tpot_distinguishable``: whether a row differs from the
    baseline by more than the two rows' error bands (``*_error``, :func:`distinguishable`); ``differs_in``
    names the cost terms behind the difference (:func:`differs_in`). ``engine``: one or several (comma-separated).

    Ratios compare each row with the first row that could be predicted (``attrs["baseline"]``):
    ``*_speedup`` = baseline time / this time (>1 is faster); ``throughput_ratio``, ``cost_ratio``,
    ``peak_flops_ratio`` (at the precision's compute rate) and ``bandwidth_ratio`` = this / baseline.
    A precision a GPU cannot run gives a row with only ``note`` set; a configuration that does not fit
    is still predicted (``fits`` False, with a note saying how much memory it needs). With no
    ``precisions`` each GPU uses the model's native format (fp16 on chips without bf16). ``ep`` and
    ``kv_precision`` apply to every row, as in :func:`predict`.
    """
    spec = get_model(model)
    hws = [get_hardware(g) for g in split_refs("gpus", gpus)]
    schemes = [get_scheme(p) for p in split_refs("precisions", precisions)] if precisions is not None else None
    input_len = require_positive_int("input_len", input_len)
    output_len = require_positive_int("output_len", output_len)
    check_context(spec, input_len, output_len)
    engines = [get_engine(e).id for e in split_refs("engine", engine)]
    rows: list[dict[str, object]] = []
    preds: list[Prediction | None] = []
    combos = [(h, sc, e) for h in hws for sc in schemes or [get_scheme(default_precision(spec, h))] for e in engines]
    for hw, scheme, eng in combos:
        note = unsupported_note(scheme, hw)
        if note is not None:
            rows.append({"gpu": hw.id, "precision": scheme.name, "engine": eng, "tp": tp, "ep": ep, "note": note})
            preds.append(None)
            continue
        dep = Deployment.resolve(spec, hw, tp=tp, ep=ep, precision=scheme.name, kv_precision=kv_precision, engine=eng)
        p = predict(dep, input_len=input_len, output_len=output_len, batch=batch, strict=False)
        preds.append(p)
        rows.append(_compare_row(hw, p))
    df = pd.DataFrame(rows).reindex(columns=_COMPARE_COLUMNS)
    df["note"] = df["note"].fillna("")
    df["fits"] = df["fits"].astype(object)
    _add_ratios(df, preds, len(engines) > 1)
    df.attrs.update(
        model=spec.id,
        input_len=input_len,
        output_len=output_len,
        batch=batch,
        tp=tp,
        ep=ep,
        kv_precision=kv_precision,
        engine=",".join(engines),
        ttft_definition=TTFT_DEFINITION,
    )
    return df


# --------------------------------------------------------------------------------------------- crossover

GRID_POINTS = 192
"""Geometric grid the crossover curve is evaluated on before the exact token is searched."""


def crossover(
    model: str | ModelSpec,
    gpu: str | HardwareSpec,
    *,
    output_len: int,
    batch: int = 1,
    precision: str | None = None,
    tp: int = 1,
    ep: int = 1,
    kv_precision: str | None = None,
    engine: str = "vllm",
    max_input: int | None = None,
) -> dict[str, object]:
    """The prompt length at which TTFT first exceeds the time to decode ``output_len`` tokens.

    Decode time is ``output_len x TPOT`` at that prompt length (TPOT grows slowly with the prompt, as every
    step reads the longer KV cache). Below the crossover the response dominates a request's latency (buy
    bandwidth); above it the prompt does (buy FLOP/s). Found by evaluating a geometric grid of prompt
    lengths in one vectorised :func:`sweep`, bracketing the first sign change, then evaluating every token
    of that bracket (another single vectorised call) to get the exact first token. Returns the length
    (None when TTFT stays below the decode time up to ``max_input``, by default the model's context minus
    ``output_len``), TTFT and decode time there, and the grid curve with whether each prompt fits in memory
    (``batch`` sequences of prompt + output in the engine's KV pool). ``max_fitting_input`` is the longest prompt
    that does; a crossover past it is reported, and its message says that the prompt does not fit.
    """
    spec = get_model(model)
    hw = get_hardware(gpu)
    output_len = require_positive_int("output_len", output_len)
    batch = require_positive_int("batch", batch)
    max_input = _longest_prompt(spec, output_len, max_input)
    dep = Deployment.resolve(spec, hw, tp=tp, ep=ep, precision=precision, kv_precision=kv_precision, engine=engine)
    grid = np.unique(np.round(np.geomspace(1, max_input, GRID_POINTS)).astype(np.int64))
    ttft, decode, grid_fits = _ttft_and_decode(dep, batch, output_len, grid)
    over = ttft >= decode
    # the longest prompt whose batch fits beside its outputs (0: not even a one-token prompt does)
    max_fitting = max(memory_budget(dep).max_context(batch) - output_len, 0)
    result: dict[str, object] = {
        "model": spec.id,
        "gpu": hw.id,
        "precision": dep.scheme.name,
        "kv_precision": dep.kv_format.name,
        "tp": dep.tp,
        "ep": dep.ep,
        "batch": batch,
        "engine": dep.engine.id,
        "output_len": output_len,
        "max_input": max_input,
        "max_fitting_input": max_fitting,
        "curve": {
            "input_len": grid.tolist(),
            "ttft_s": ttft.tolist(),
            "decode_s": decode.tolist(),
            "fits": grid_fits.astype(bool).tolist(),
        },
    }
    if not over.any():
        result.update(_no_crossover(float(ttft[-1]), float(decode[-1]), output_len, max_input, max_fitting))
        return result
    x = _first_prompt_over(dep, batch, output_len, grid, int(np.argmax(over)))
    result.update(_crossover_at(dep, batch, output_len, x, max_fitting))
    return result


def _longest_prompt(spec: ModelSpec, output_len: int, max_input: int | None) -> int:
    """``max_input`` checked against the room the model's context leaves beside ``output_len`` (None: all of it)."""
    if output_len < 2:
        raise InfercastError("must be >= 2: with one output token there is no decode phase", field="output_len")
    limit = spec.max_context - output_len
    if limit < 1:
        raise InfercastError(f"leaves no room for a prompt in the {spec.max_context}-token context", field="output_len")
    if max_input is None:
        max_input = limit
    max_input = require_positive_int("max_input", max_input)
    if max_input > limit:
        raise InfercastError(
            f"{max_input} + output_len {output_len} exceeds the {spec.max_context}-token context of {spec.id}",
            field="max_input",
        )
    return max_input


def _ttft_and_decode(
    dep: Deployment, batch: int, output_len: int, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TTFT, decode time of ``output_len`` tokens and whether the batch fits, per prompt length (one sweep)."""
    df = sweep(
        models=[dep.model],
        gpus=[dep.hardware],
        precisions=dep.scheme.name,
        batches=batch,
        input_lens=lengths.tolist(),
        output_lens=output_len,
        tps=dep.tp,
        eps=dep.ep,
        engines=dep.engine.id,
        kv_precisions=dep.kv_format.name,
    )
    df = df.sort_values("input_len")
    return df["ttft_last_s"].to_numpy(), df["tpot_last_s"].to_numpy() * output_len, df["fits"].to_numpy()


def _no_crossover(ttft: float, decode: float, output_len: int, max_input: int, max_fitting: int) -> dict[str, object]:
    """The result's fields when TTFT stays below the decode time up to ``max_input``."""
    return {
        "found": False,
        "crossover_input_len": None,
        "ttft_s": ttft,
        "decode_s": decode,
        "fits": None,
        "message": f"no crossover: at {max_input:,} prompt tokens TTFT ({_ms(ttft)}) is still below the "
        f"{output_len}-token decode time ({_ms(decode)})"
        + (
            ""
            if max_fitting >= max_input
            else f"; prompts past {max_fitting:,} tokens do not fit in memory"
            if max_fitting
            else "; no prompt fits in memory"
        ),
    }


def _first_prompt_over(dep: Deployment, batch: int, output_len: int, grid: np.ndarray, k: int) -> int:
    """The first prompt length whose TTFT reaches the decode time, ``grid[k]`` being the first grid point that does.

    TTFT < decode at grid[k-1] and >= at grid[k]. Decode time also grows with the prompt, so the difference can
    plateau for a few tokens: every token of the bracket is evaluated in one call and the first one at or over
    the line taken (bisection could land on a later sign change)."""
    if k == 0:
        return int(grid[0])
    bracket = np.arange(int(grid[k - 1]) + 1, int(grid[k]) + 1, dtype=np.int64)
    t, d, _ = _ttft_and_decode(dep, batch, output_len, bracket)
    return int(bracket[int(np.argmax(t >= d))])


def _crossover_at(dep: Deployment, batch: int, output_len: int, x: int, max_fitting: int) -> dict[str, object]:
    """The result's fields for a crossover at a prompt of ``x`` tokens (and at ``x - 1``, just before it)."""
    t, d, fits = _ttft_and_decode(dep, batch, output_len, np.array([x - 1, x]) if x > 1 else np.array([x]))
    message = (
        f"prefill dominates from a {x:,}-token prompt: TTFT {_ms(t[-1])} >= {output_len} x TPOT = {_ms(d[-1])}"
        if x > 1
        else f"prefill dominates at every prompt length: TTFT {_ms(t[-1])} >= {output_len} x TPOT = {_ms(d[-1])}"
    )
    if not fits[-1]:
        message += (
            f"; that prompt does not fit in memory: {dep.hardware.id} holds {batch} x (prompt + {output_len}) "
            f"tokens of KV up to a {max_fitting:,}-token prompt"
            if max_fitting
            else f"; no prompt fits in memory: the weights and runtime leave {dep.hardware.id} no room for the KV of "
            f"{batch} sequence(s) of {output_len} output tokens"
        )
    out: dict[str, object] = {
        "found": True,
        "crossover_input_len": x,
        "ttft_s": float(t[-1]),
        "decode_s": float(d[-1]),
        "tpot_s": float(d[-1]) / output_len,
        "fits": bool(fits[-1]),
        "message": message,
    }
    if x > 1:
        out["ttft_before_s"], out["decode_before_s"] = float(t[0]), float(d[0])
    return out
