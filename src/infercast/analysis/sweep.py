"""``sweep``: the cartesian product of scenarios, evaluated with NumPy arrays.

Categorical choices (model, GPU, precision, TP/EP, engine) form groups; within a group every numeric
combination (batch x input x output) is one column of a feature matrix, and TTFT, TPOT, E2E and
throughput for all of them come from a handful of vectorised evaluations — no Python loop per
configuration. Invalid groups (a precision the chip cannot run, a TP that does not divide the heads) are
skipped and listed in ``DataFrame.attrs["skipped"]``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from infercast.analysis.error_bands import band_columns, within_rate_limits
from infercast.analysis.phases import first_token_share, prefill_budget, static_batch_means
from infercast.cost.batch import NUM_FEATURES, F, StepBatch
from infercast.cost.front_end import static_batch_delays
from infercast.cost.series import LinearRun, linear_run
from infercast.cost.step import StepCostModel, cost_model
from infercast.errors import InfercastError
from infercast.limits import BYTES_PER_SWEEP_ROW, check_rows
from infercast.memory import kv_blocks_per_sequence, memory_budget
from infercast.specs.deployment import Deployment
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec

MAX_GRID_INT = 2**31 - 1
"""Largest batch / length a sweep takes (int32): keeps products of sizes exact and rows from wrapping."""


def _as_list(value: object) -> list:
    if value is None:
        return [None]
    if isinstance(value, str) or not isinstance(value, Iterable):
        return [value]
    return list(value)


def cost_per_mtok(price_per_gpu_hour: float, gpus: int, out_tok_s: float | np.ndarray) -> float | np.ndarray:
    """Dollars per million output tokens of a replica of ``gpus`` GPUs at ``price_per_gpu_hour`` each.

    A price of 0 (owned hardware, or none given) costs 0. Works on floats and arrays (sweep, compare, select).
    """
    return gpus * price_per_gpu_hour / 3600.0 / out_tok_s * 1e6


def _numeric_grid(name: str, value: object) -> np.ndarray:
    """Sorted unique integers >= 1 from an int or a sequence of ints, or an error naming ``name``."""
    try:
        arr = np.unique(np.asarray(_as_list(value), dtype=float))
    except (TypeError, ValueError):
        raise InfercastError(f"must be integers >= 1, got {value!r}", field=name) from None
    if arr.size == 0 or not np.isfinite(arr).all() or (arr < 1).any() or (arr != np.round(arr)).any():
        raise InfercastError(f"must be integers >= 1, got {value!r}", field=name)
    if arr.max() > MAX_GRID_INT:
        raise InfercastError(f"{arr.max():.0f} is too large; the limit is {MAX_GRID_INT}", field=name)
    return arr


def static_batch_grid(
    model: StepCostModel, batches: np.ndarray, input_lens: np.ndarray, output_lens: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """TTFT of shape (nB, nI) and total decode time of shape (nB, nI, nO) for every static batch.

    Prefill depends only on (B, I) and a decode step's fixed part only on B, so the grid is evaluated
    on the (B, I) pairs and broadcast over output lengths; the context-dependent attention terms are
    summed over each output length in closed form.
    """
    window = model.dep.model.attention_window
    bb, ii = (g.ravel() for g in np.meshgrid(batches, input_lens, indexing="ij"))
    zero = np.zeros((NUM_FEATURES, 1))
    ttft = linear_run(model, StepBatch.uniform(prefill_seqs=bb, chunk=ii, window=window), zero).total(1.0)
    ttft = ttft + model.profile.mean_request_overhead_s
    steps = np.maximum(output_lens - 1, 0)[None, :]  # (1, nO)
    delta = np.zeros((NUM_FEATURES, bb.size))
    delta[F["decode_kv"]] = bb
    if not window:
        delta[F["decode_kv_win"]] = bb
        run = linear_run(model, StepBatch.uniform(decode_seqs=bb, context=ii + 1), delta)
        decode = _broadcast_total(run, steps)
    else:
        inside = delta.copy()
        inside[F["decode_kv_win"]] = bb
        run1 = linear_run(model, StepBatch.uniform(decode_seqs=bb, context=ii + 1, window=window), inside)
        start2 = np.maximum(ii, window) + 1  # where the second run starts does not depend on O
        run2 = linear_run(model, StepBatch.uniform(decode_seqs=bb, context=start2, window=window), delta)
        n1 = np.clip(window - ii[:, None], 0, steps)
        decode = _broadcast_total(run1, n1) + _broadcast_total(run2, steps - n1)
    shape = (batches.size, input_lens.size)
    return ttft.reshape(shape), decode.reshape((*shape, output_lens.size))


def _broadcast_total(run: LinearRun, n: np.ndarray) -> np.ndarray:
    cols = LinearRun(run.fixed[:, None], run.c0[:, :, None], run.dc[:, :, None], run.m0[:, :, None], run.dm[:, :, None])
    return cols.total(n)


def sweep(
    models: str | ModelSpec | Sequence[str | ModelSpec] = "llama-3.1-8b",
    gpus: str | HardwareSpec | Sequence[str | HardwareSpec] = "h100-sxm",
    precisions: str | Sequence[str | None] | None = None,
    batches: int | Sequence[int] = 1,
    input_lens: int | Sequence[int] = 2048,
    output_lens: int | Sequence[int] = 256,
    tps: int | Sequence[int] = 1,
    eps: int | Sequence[int] = 1,
    engines: str | Sequence[str] = "vllm",
    kv_precisions: str | Sequence[str | None] | None = None,
    pps: int | Sequence[int] = 1,
    attention_dps: int | Sequence[int] = 1,
) -> pd.DataFrame:
    """Evaluate every combination; one DataFrame row per configuration (times in seconds, static batches).

    ``ttft_s`` / ``tpot_s`` are means over each batch's requests, as :func:`~infercast.analysis.scenario.predict`
    and ``simulate --offline`` report them; ``ttft_last_s`` / ``tpot_last_s`` the batch's last request's (the
    whole batch prefilled first).

    ``ttft_error`` / ``tpot_error``: the expected relative error of that row's regime (cross-validated error
    bands, :mod:`infercast.analysis.error_bands`; NaN where none is committed).

    ``pps`` / ``attention_dps``: pipeline stages and attention data parallelism of each replica (layouts as
    :meth:`Deployment.resolve` takes them); ``gpus`` is the replica's GPU count, which ``cost_per_mtok_usd`` pays.
    ``precisions`` / ``kv_precisions`` None (or a None entry) means each model's default on each GPU (see
    :meth:`Deployment.resolve`). Groups that cannot run are listed in ``attrs["skipped"]`` with the reason and
    the field it concerns; when none can, the first reason is raised with its field.
    """
    num = [
        _numeric_grid(n, v)
        for n, v in zip(("batches", "input_lens", "output_lens"), (batches, input_lens, output_lens), strict=True)
    ]
    frames, skipped, first_error = [], [], None
    choices = [_as_list(v) for v in (models, gpus, precisions, kv_precisions, tps, eps, engines, pps, attention_dps)]
    rows = int(np.prod([len(c) for c in choices], dtype=float) * np.prod([g.size for g in num], dtype=float))
    check_rows("batches", rows, BYTES_PER_SWEEP_ROW, "sweep rows")
    groups = itertools.product(*choices)
    for model_id, gpu, prec, kvp, tp, ep, engine, pp, dp in groups:
        try:
            dep = Deployment.resolve(
                model_id, gpu, tp=tp, ep=ep, precision=prec, kv_precision=kvp, engine=engine, pp=pp, attention_dp=dp
            )
        except InfercastError as exc:
            first_error = first_error or exc
            skipped.append(
                {
                    "model": _name(model_id),
                    "gpu": _name(gpu),
                    "precision": prec,
                    "kv_precision": kvp,
                    "tp": tp,
                    "ep": ep,
                    "pp": pp,
                    "attention_dp": dp,
                    "engine": _name(engine),
                    "field": exc.field,
                    "reason": str(exc),
                }
            )
            continue
        frames.append(_evaluate_group(dep, *num))
    if not frames:
        if first_error is None:
            raise InfercastError("no valid configuration: empty sweep")
        raise InfercastError(
            f"no valid configuration: {first_error.message}", field=first_error.field, allowed=first_error.allowed
        )
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    df.attrs["skipped"] = skipped
    return df


def _name(ref: object) -> object:
    """Catalog id of a spec object (a ModelSpec, HardwareSpec or EngineSpec passed instead of its id)."""
    return getattr(ref, "id", ref)


def _evaluate_group(dep: Deployment, batches: np.ndarray, inputs: np.ndarray, outputs: np.ndarray) -> pd.DataFrame:
    model = cost_model(dep)
    ttft_g, decode_g = static_batch_grid(model, batches, inputs, outputs)
    bat, inp, out = (g.ravel() for g in np.meshgrid(batches, inputs, outputs, indexing="ij"))
    ttft = np.broadcast_to(ttft_g[:, :, None], decode_g.shape).ravel()
    decode = decode_g.ravel()
    steps = np.maximum(out - 1, 0)
    e2e = ttft + decode
    tpot = decode / np.maximum(steps, 1)
    if model.profile.stream_token_s > 0:  # the API server's front-end delays first and last tokens (predict's rule)
        first, last = static_batch_delays(model.profile.stream_token_s, bat, decode, steps)
        ttft, e2e = ttft + first, e2e + last
        tpot = (e2e - ttft) / np.maximum(steps, 1)
    budget, whole = prefill_budget(dep, None)
    prefill = np.broadcast_to(ttft_g[:, :, None], decode_g.shape).ravel() - model.profile.mean_request_overhead_s
    ttft_mean, tpot_mean = static_batch_means(ttft, prefill, e2e, steps, first_token_share(inp, bat, budget, whole))
    out_tput = bat * out / e2e
    mem = memory_budget(dep)
    m = dep.model
    ctx = inp + out
    blocks = (
        kv_blocks_per_sequence(
            ctx,
            mem.block_size,
            m.sliding_window,
            m.num_attention_layers,
            m.num_sliding_layers,
            mem.state_blocks_per_sequence,
        )
        * bat
    )
    n = bat.size

    def const(value: object) -> pd.Categorical:
        return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[value])

    return pd.DataFrame(
        {
            "model": const(dep.model.id),
            "gpu": const(dep.hardware.id),
            "precision": const(dep.scheme.name),
            "kv_precision": const(dep.kv_format.name),
            "tp": np.full(n, dep.tp, dtype=np.int16),
            "ep": np.full(n, dep.ep, dtype=np.int16),
            "pp": np.full(n, dep.pp, dtype=np.int16),
            "attention_dp": np.full(n, dep.attention_dp, dtype=np.int16),
            "gpus": np.full(n, dep.gpus, dtype=np.int32),
            "engine": const(dep.engine.id),
            "batch": bat.astype(np.int64),
            "input_len": inp.astype(np.int64),
            "output_len": out.astype(np.int64),
            "ttft_s": ttft_mean,
            "ttft_last_s": ttft,
            "tpot_s": tpot_mean,
            "tpot_last_s": tpot,
            "e2e_s": e2e,
            "output_throughput_tok_s": out_tput,
            "total_throughput_tok_s": bat * (inp + out) / e2e,
            "weights_bytes": np.full(n, mem.weights_bytes),
            "kv_cache_bytes": blocks * mem.block_bytes,
            "within_context": ctx <= m.max_context,
            "fits": mem.weights_fit & (blocks <= mem.num_blocks),
            "cost_per_mtok_usd": cost_per_mtok(dep.hardware.price_per_hour_usd, dep.gpus, out_tput),
            **band_columns(dep, bat),
            "within_calibrated_rates": within_rate_limits(dep.engine.id, bat / e2e, out_tput),
        },
        copy=False,
    )
