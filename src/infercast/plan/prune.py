"""Analytic pruning: drop candidates that cannot work before any simulation.

A candidate is pruned when its precision does not run on the GPU, its TP does not fit the node or the model,
one request of the longest length does not fit in memory, or its unloaded latency already breaks an
objective: a single request at the median lengths (the analytic screen ``select`` shows,
:func:`~infercast.plan.screen.screen_gpu`, batch 1) is a floor on the latency of at least half the requests,
so a floor above a limit on a percentile >= 50 (or on a goodput limit with attainment >= 0.5) can never be met.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Any

from infercast.analysis.compare import unsupported_note
from infercast.analysis.scenario import predict
from infercast.cost.profile import load_profile
from infercast.display import fmt_time
from infercast.errors import InfercastError
from infercast.memory import memory_budget
from infercast.plan.candidates import Candidate
from infercast.plan.screen import ScreenLayout, ScreenQuery, screen_gpu
from infercast.plan.slo import SLOSet
from infercast.plan.traffic import Traffic
from infercast.specs.catalog import get_hardware
from infercast.specs.deployment import Deployment, default_precision
from infercast.specs.engine import get_engine
from infercast.specs.model import ModelSpec
from infercast.specs.precision import get_scheme

ROOFLINE_ENGINE = "ideal"
"""Engine profile with no overheads and peak efficiency: what the cost bounds are computed on."""
FLOOR_MARGIN = 1 + 1e-9
"""A floor must exceed its limit beyond rounding to prune (predict and an unloaded simulated request agree to
~1e-14 relative, the same compiled step costs, once the request's own varying overhead replaces the mean:
see :func:`jitter_credit`)."""


def resolve(model: ModelSpec, c: Candidate) -> Candidate:
    """The candidate with its precision filled in (the model's native one, fp16 on chips without bf16)."""
    if c.precision:
        return replace(c, precision=get_scheme(c.precision).name)
    return replace(c, precision=default_precision(model, get_hardware(c.gpu)))


def _check_deployment(model: ModelSpec, c: Candidate, tp: int, longest: int) -> str | None:
    """Why a pool of ``c`` at ``tp`` (with ``c``'s pipeline / attention-DP layout when aggregated) cannot hold
    one request of ``longest`` tokens; None when it can."""
    hw = get_hardware(c.gpu)
    note = unsupported_note(get_scheme(c.precision or default_precision(model, hw)), hw)
    if note is not None:
        return note
    try:
        dep = Deployment.resolve(
            model,
            hw,
            tp=tp,
            ep=c.ep,
            precision=c.precision,
            kv_precision=c.kv_precision,
            engine=c.engine,
            pp=c.pp,
            attention_dp=c.attention_dp,
        )
        mem = memory_budget(
            dep,
            context=longest,
            concurrency=1,
            max_num_batched_tokens=c.max_num_batched_tokens,
            max_num_seqs=c.max_num_seqs,
        )  # the run's knobs size the activation reserve
    except InfercastError as exc:
        return exc.message
    if not mem.fits:
        return (
            f"memory: {mem.total_bytes / 1e9:.1f} GB per GPU for one {longest}-token request at {dep.layout} > "
            f"{mem.capacity_bytes / 1e9:.1f} GB"
        )
    return None


@lru_cache(maxsize=256)
def jitter_credit(gpu: str, engine: str) -> float:
    """Seconds an unloaded request's median TTFT can sit below ``predict``'s: predict adds the varying request
    overhead's mean (``request_jitter_s``), an exponential draw's median is ln 2 of that."""
    hw = get_hardware(gpu)
    return (1 - math.log(2)) * load_profile(hw.id, hw.architecture, engine).request_jitter_s


@lru_cache(maxsize=4096)
def _screen(
    model: ModelSpec, gpu: str, precision: str, tp: int, query: ScreenQuery, layout: ScreenLayout
) -> dict[str, Any]:
    (row,) = screen_gpu(model, get_hardware(gpu), [get_scheme(precision)], [tp], query, layout)
    return row


def _binding_limit(slo: SLOSet, metric: str) -> float:
    """The tightest limit on ``metric`` that an unloaded floor can rule out (inf when none)."""
    limits = [
        t.limit_s
        for t in slo.terms
        if t.metric == metric and (t.percentile >= 50 if t.percentile is not None else slo.attainment >= 0.5)
    ]
    return min(limits) * FLOOR_MARGIN if limits else math.inf


def prune_reason(model: ModelSpec, c: Candidate, traffic: Traffic, slo: SLOSet) -> str | None:
    """Why ``c`` cannot meet ``slo`` whatever the load (None: it goes on to the simulator)."""
    tps = [c.tp] + ([c.decode_tp or c.tp] if c.disaggregated else [])
    for tp in dict.fromkeys(tps):
        reason = _check_deployment(model, c, tp, traffic.longest)
        if reason is not None:
            return reason
    i, o = traffic.median_lengths
    o = max(o, 2)
    ttft_lim, tpot_lim = _binding_limit(slo, "ttft"), _binding_limit(slo, "tpot")
    # disaggregated: the prefill pool sets TTFT, the decode pool TPOT
    credit = jitter_credit(c.gpu, c.engine)
    layout = ScreenLayout(c.ep, c.kv_precision, c.engine, c.pp, c.attention_dp)
    query = ScreenQuery(ttft_lim, math.inf if c.disaggregated else tpot_lim, i, o, ttft_credit_s=credit)
    pre = _screen(model, c.gpu, str(c.precision), c.tp, query, layout)
    rows = [pre]
    if c.disaggregated:
        decode = ScreenQuery(math.inf, tpot_lim, i, o, ttft_credit_s=credit)
        pool = ScreenLayout(c.ep, c.kv_precision, c.engine)
        rows.append(_screen(model, c.gpu, str(c.precision), c.decode_tp or c.tp, decode, pool))
    for row in rows:
        if not row["passes"]:
            return f"unloaded: {row['reason']} (median lengths)"
    e2e_lim = _binding_limit(slo, "e2e")
    e2e = pre["ttft_s"] - credit + (o - 1) * rows[-1]["tpot_s"]
    if e2e > e2e_lim:
        return f"unloaded: E2E {fmt_time(e2e, sig=3)} > {fmt_time(e2e_lim / FLOOR_MARGIN, sig=3)} (median lengths)"
    return None


@lru_cache(maxsize=4096)
def _static_batch(
    model: ModelSpec,
    gpu: str,
    precision: str,
    tp: int,
    ep: int,
    kv: str | None,
    engine: str,
    max_seqs: int | None,
    input_len: int,
    output_len: int,
    pp: int = 1,
    attention_dp: int = 1,
) -> tuple[int, float, float]:
    """(B, TTFT, TPOT) of the largest static batch the unit holds, at pure roofline (engine 'ideal')."""

    def unit(engine: str) -> Deployment:
        return Deployment.resolve(
            model,
            gpu,
            tp=tp,
            ep=ep,
            precision=precision,
            kv_precision=kv,
            engine=engine,
            pp=pp,
            attention_dp=attention_dp,
        )

    mem = memory_budget(unit(engine), max_num_seqs=max_seqs)
    seqs = max_seqs or get_engine(engine).for_hardware(get_hardware(gpu)).max_num_seqs
    batch = max(1, min(seqs, mem.max_concurrency(input_len + output_len)))
    p = predict(
        unit(ROOFLINE_ENGINE),
        input_len=input_len,
        output_len=output_len,
        batch=batch,
        strict=False,
    )
    return batch, p.ttft_last_s, p.tpot_last_s


def rate_bound(model: ModelSpec, c: Candidate, traffic: Traffic) -> float:
    """Requests/s one unit could serve at most: its largest batch (memory and max running requests allow) at
    pure roofline, prefilled then decoded — B / (prefill of B prompts + (O - 1) decode steps at batch B).
    Real steps are slower than the roofline, so no search finds more (a disaggregated group: the smaller of
    its prefill pool, P x B / prefill time, and its decode pool, D x B / decode time)."""
    i, o = max(round(traffic.mean_input), 1), max(round(traffic.mean_output), 2)
    key = (c.precision, c.ep, c.kv_precision, c.engine)
    pre = _static_batch(model, c.gpu, key[0], c.tp, key[1], key[2], key[3], c.max_num_seqs, i, o, c.pp, c.attention_dp)
    if not c.disaggregated:
        b, ttft, tpot = pre
        return b / (ttft + (o - 1) * tpot)
    dec = _static_batch(model, c.gpu, key[0], c.decode_tp or c.tp, key[1], key[2], key[3], c.max_num_seqs, i, o)
    return min(c.prefill * pre[0] / pre[1], c.decode * dec[0] / ((o - 1) * dec[2]))
