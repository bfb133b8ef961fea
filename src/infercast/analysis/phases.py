"""Prefill and decode phases of static batches as sums of step costs, vectorised over configurations.

Every argument may be a scalar or an array of N configurations (all for one compiled deployment); results
are :class:`RangeSums` with N columns. ``predict`` calls these with N = 1 and ``sweep`` with large N.
"""

from __future__ import annotations

import math

import numpy as np

from infercast.cost.batch import NUM_FEATURES, F, StepBatch, causal_pairs, window_pairs
from infercast.cost.series import RangeSums, add_sums, sum_steps, sums_from
from infercast.cost.step import StepCostModel
from infercast.specs.deployment import Deployment


def _arr(v: np.ndarray | float) -> np.ndarray:
    return np.atleast_1d(np.asarray(v, dtype=float))


def prefill_sums(
    model: StepCostModel,
    input_len: np.ndarray | float,
    batch: np.ndarray | float = 1,
    chunk_size: np.ndarray | float | None = None,
) -> RangeSums:
    """The prefill of ``batch`` prompts of ``input_len`` tokens (TTFT of a static batch).

    Without ``chunk_size`` all prompts run in one step. With it, the B·I prompt tokens run in
    ceil(B·I / chunk) steps; attention totals are exact for contiguous chunks of each prompt, and the
    totals are spread evenly over the steps (all steps are compute-bound, so the sum is unchanged).
    """
    inp, bat = np.broadcast_arrays(_arr(input_len), _arr(batch))
    window = model.dep.model.attention_window
    if chunk_size is None:
        first = StepBatch.uniform(prefill_seqs=bat, chunk=inp, cached=0, window=window)
        return sum_steps(model, first, np.zeros((NUM_FEATURES, 1)), 1)
    chunk = np.broadcast_to(_arr(chunk_size), inp.shape)
    total_tokens = bat * inp
    steps = np.maximum(np.ceil(total_tokens / chunk), 1)
    chunks_per_seq = np.ceil(inp / np.minimum(chunk, inp))
    c = np.minimum(chunk, inp)
    # sum over a prompt's chunks i = 0..k-1 of (c0 + c) with c0 = i·c, capped at the prompt
    kv_full = _capped_chunk_kv(c, chunks_per_seq, inp, np.inf)
    x = np.zeros((NUM_FEATURES, inp.size))
    x[F["one"]] = 1
    x[F["prefill_tokens"]] = total_tokens / steps
    x[F["tokens"]] = total_tokens / steps
    x[F["sampled"]] = bat / steps
    x[F["seqs"]] = np.maximum(bat * chunks_per_seq / steps, 1)
    x[F["prefill_seqs"]] = x[F["seqs"]]
    x[F["prefill_pairs"]] = bat * causal_pairs(inp, 0) / steps
    x[F["prefill_kv"]] = bat * kv_full / steps
    if window:
        x[F["prefill_pairs_win"]] = bat * window_pairs(inp, 0, window) / steps
        x[F["prefill_kv_win"]] = bat * _capped_chunk_kv(c, chunks_per_seq, inp, window) / steps
    else:
        x[F["prefill_pairs_win"]] = x[F["prefill_pairs"]]
        x[F["prefill_kv_win"]] = x[F["prefill_kv"]]
    return sum_steps(model, StepBatch(x), np.zeros((NUM_FEATURES, 1)), steps)


def _capped_chunk_kv(c: np.ndarray, k: np.ndarray, total: np.ndarray, window: float) -> np.ndarray:
    """sum_{i<k} (min(i·c, window-1) + c_i) for a prompt of ``total`` tokens cut into k chunks of c."""
    if np.isinf(window):
        offsets = c * k * (k - 1) / 2
    else:
        m = np.minimum(k, np.ceil((window - 1) / c))
        offsets = c * m * (m - 1) / 2 + (k - m) * (window - 1)
    return offsets + total


def decode_sums(
    model: StepCostModel,
    input_len: np.ndarray | float,
    output_len: np.ndarray | float,
    batch: np.ndarray | float = 1,
) -> RangeSums:
    """The O-1 decode steps of a static batch after prefill: step j has B decodes at context I + j."""
    inp, out, bat = np.broadcast_arrays(_arr(input_len), _arr(output_len), _arr(batch))
    window = model.dep.model.attention_window
    steps = np.maximum(out - 1, 0)
    delta = np.zeros((NUM_FEATURES, *inp.shape))
    delta[F["decode_kv"]] = bat
    if not window:
        delta[F["decode_kv_win"]] = bat
        first = StepBatch.uniform(decode_seqs=bat, context=inp + 1)
        return sum_steps(model, first, delta, steps)
    # windowed layers stop growing once the context reaches the window: two linear runs
    n1 = np.clip(window - inp, 0, steps)
    delta_in = delta.copy()
    delta_in[F["decode_kv_win"]] = bat
    run1 = sum_steps(model, StepBatch.uniform(decode_seqs=bat, context=inp + 1, window=window), delta_in, n1)
    run2 = sum_steps(model, StepBatch.uniform(decode_seqs=bat, context=inp + 1 + n1, window=window), delta, steps - n1)
    return add_sums(run1, run2)


def static_batch_phases(
    model: StepCostModel, input_len: int, output_len: int, batch: int
) -> tuple[RangeSums, RangeSums, float]:
    """Prefill and decode sums of one static batch, plus the single-stream decode total (for ITL).

    The same quantities as :func:`prefill_sums` and :func:`decode_sums`, for one configuration, from a single
    evaluation of the few step shapes involved (the fast path of ``predict``).
    """
    window = model.dep.model.attention_window
    i, b = float(input_len), float(batch)
    steps = max(output_len - 1, 0)
    n1 = min(max(window - input_len, 0), steps) if window else steps
    n2 = steps - n1
    runs = [(i + 1, b, True), (i + 1, 1.0, True)]  # (start context, sequences, inside window)
    if window and n2:
        start2 = max(i, window) + 1
        runs += [(start2, b, False), (start2, 1.0, False)]
    nr = len(runs)
    x = np.zeros((NUM_FEATURES, 1 + 2 * nr))
    x[F["one"]] = 1.0
    x[F["tokens"], 0] = x[F["prefill_tokens"], 0] = b * i
    x[F["sampled"], 0] = x[F["seqs"], 0] = x[F["prefill_seqs"], 0] = b
    x[F["prefill_pairs"], 0] = b * causal_pairs(i, 0)
    x[F["prefill_kv"], 0] = b * i
    x[F["prefill_pairs_win"], 0] = b * float(window_pairs(i, 0, window)) if window else x[F["prefill_pairs"], 0]
    x[F["prefill_kv_win"], 0] = b * i  # a chunk touches all its own keys, whatever the window
    # columns 1..nr: each run's first step; nr+1..2nr: its second (context one token longer)
    seqs, kv, kv_win = [], [], []
    for step in (0, 1):
        for ctx, n, inside in runs:
            c = ctx + step
            seqs.append(n)
            kv.append(n * c)
            kv_win.append(n * (min(c if inside else ctx, window) if window else c))
    for feature in _DECODE_COUNTS:
        x[feature, 1:] = seqs
    x[F["decode_kv"], 1:] = kv
    x[F["decode_kv_win"], 1:] = kv_win
    ev = model.evaluate(model.columns(StepBatch(x)), fast=True)
    pre = sums_from(tuple(a[..., :1] for a in ev), None, 1.0)
    # every decode run at once: run r starts at column 1 + r and grows towards column 1 + nr + r
    counts = np.array([float(n1), float(n1), float(n2), float(n2)][:nr])
    runs_sums = sums_from(tuple(a[..., 1 : 1 + nr] for a in ev), tuple(a[..., 1 + nr :] for a in ev), counts)
    totals = runs_sums.total_s
    if nr == 2:
        return pre, _column(runs_sums, 0), float(totals[1])
    return pre, _add_columns(runs_sums, 0, 2), float(totals[1] + totals[3])


_DECODE_COUNTS = (F["tokens"], F["sampled"], F["decode_tokens"], F["seqs"])
"""Features that count the decodes of a decode-only step (one token, one sample, one sequence each)."""


def _column(s: RangeSums, c: int) -> RangeSums:
    return RangeSums(*(getattr(s, f)[..., c : c + 1] for f in _SUM_FIELDS))


def _add_columns(s: RangeSums, a: int, b: int) -> RangeSums:
    return RangeSums(*(getattr(s, f)[..., a : a + 1] + getattr(s, f)[..., b : b + 1] for f in _SUM_FIELDS))


_SUM_FIELDS = ("flops", "bytes", "compute_s", "memory_s", "overhead_s", "time_s", "engine_overhead_s", "steps")


def first_token_share(
    input_len: np.ndarray | float,
    batch: np.ndarray | float,
    budget: np.ndarray | float,
    whole_prompts: bool = False,
) -> np.ndarray:
    """Mean over a static batch's requests of the share of the batch's prefill done when each gets its first
    token: the engine prefills the prompts in order, ``budget`` tokens per step (its max_num_batched_tokens, or
    ``--chunk-size``), so request i's first token comes with the step that holds its last prompt token.

    ``whole_prompts``: prompts are never split (vLLM V0 / SGLang prefill-first, TensorRT-LLM in-flight), so a
    step holds max(1, budget // I) whole prompts; otherwise prompts are packed token by token (chunked prefill,
    vLLM V1). Assumes every prompt token costs the same (equal prompts: the attention of each prompt is the
    same whichever step it runs in). 1 when the batch fits in one step; (B + 1) / 2B as the budget shrinks.
    """
    inp, bat, k = np.broadcast_arrays(_arr(input_len), _arr(batch), _arr(budget))
    total = bat * inp
    if whole_prompts:
        per_step = np.maximum(np.floor(k / inp), 1.0)
        groups = np.ceil(bat / per_step)
        done = per_step * per_step * groups * (groups - 1) / 2 / bat + (bat - (groups - 1) * per_step)
        share = done / bat
    else:
        # sum_i ceil(i I / K) K ~ I B (B + 1) / 2 + B (K - g) / 2, g = gcd(I, K): the rounding up to a step end
        # averages (K - g) / 2 tokens (exact when B spans whole periods of K / g requests)
        kc = np.clip(k, 1, total)  # a budget past the batch's tokens is one step (1 below): no int64 overflow
        g = np.gcd(inp.astype(np.int64), kc.astype(np.int64)).astype(float)
        share = (inp * (bat + 1) / 2 + (kc - g) / 2) / total
    return np.where(k >= total, 1.0, np.clip(share, 0.0, 1.0))


def first_token_share_one(input_len: float, batch: float, budget: float, whole_prompts: bool = False) -> float:
    """:func:`first_token_share` for one scenario, in plain floats (predict's hot path; tested equal to it)."""
    total = batch * input_len
    if budget >= total:
        return 1.0
    if whole_prompts:
        per_step = max(math.floor(budget / input_len), 1.0)
        groups = math.ceil(batch / per_step)
        done = per_step * per_step * groups * (groups - 1) / 2 / batch + (batch - (groups - 1) * per_step)
        share = done / batch
    else:
        k = min(max(budget, 1.0), total)
        g = float(math.gcd(int(input_len), int(k)))
        share = (input_len * (batch + 1) / 2 + (k - g) / 2) / total
    return min(max(share, 0.0), 1.0)


def static_batch_means(
    ttft_last: np.ndarray | float,
    prefill_s: np.ndarray | float,
    e2e: np.ndarray | float,
    steps: np.ndarray | float,
    share: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray]:
    """(mean TTFT, mean TPOT) over the requests of static batches from the last request's TTFT, the batch's
    prefill time, E2E, O - 1 and :func:`first_token_share` (TPOT 0 without a decode step)."""
    ttft_mean = ttft_last - (1.0 - np.asarray(share)) * prefill_s
    return ttft_mean, np.where(np.asarray(steps) > 0, (e2e - ttft_mean) / np.maximum(steps, 1), 0.0)


def prefill_budget(dep: Deployment, chunk_size: int | None) -> tuple[float, bool]:
    """Tokens per prefill step and whether prompts stay whole, as the engine schedules a static batch: the
    chunk size given, else the engine's max_num_batched_tokens (whole prompts unless it chunks them)."""
    if chunk_size is not None:
        return float(chunk_size), False
    return float(dep.engine.max_num_batched_tokens), dep.engine.scheduler != "chunked"
