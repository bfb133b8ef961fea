"""The planner's analytic screen: memory fit and unloaded latency of every precision x TP of a GPU.

One vectorised :func:`~infercast.analysis.sweep.sweep` per GPU. ``infercast select`` shows it per GPU
(:mod:`infercast.plan.select`); the planner prunes with it before simulating (:mod:`infercast.plan.prune`), so
a configuration ``select`` fails is never one the planner searches, and both say why in the same words.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from infercast.analysis.compare import does_not_fit, unsupported_note
from infercast.analysis.sweep import sweep
from infercast.display import fmt_time
from infercast.errors import InfercastError, require_positive_int, require_positive_number
from infercast.memory import memory_budget
from infercast.specs.deployment import Deployment
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.precision import PrecisionScheme


@dataclass(frozen=True)
class ScreenQuery:
    """The unloaded question: a static batch of ``batch`` requests (no queueing), its last request's TTFT and
    TPOT against ``ttft_s`` and ``tpot_s``. ``ttft_credit_s``: checked is TTFT minus this (a lower bound: the
    planner's floors credit the varying request overhead's mean above its median)."""

    ttft_s: float
    tpot_s: float
    input_len: int
    output_len: int
    batch: int = 1
    ttft_credit_s: float = 0.0

    def checked(self) -> ScreenQuery:
        """The query with every limit and length validated (errors name ttft, tpot, input_len, ...)."""
        return replace(
            self,
            ttft_s=require_positive_number("ttft", self.ttft_s),
            tpot_s=require_positive_number("tpot", self.tpot_s),
            input_len=require_positive_int("input_len", self.input_len),
            output_len=require_positive_int("output_len", self.output_len),
            batch=require_positive_int("batch", self.batch),
        )


@dataclass(frozen=True)
class ScreenLayout:
    """What every screened configuration shares beyond GPU, precision and TP: expert-parallel ways, KV format,
    engine, and each replica's pipeline stages and attention data parallelism."""

    ep: int = 1
    kv_precision: str | None = None
    engine: str = "vllm"
    pp: int = 1
    attention_dp: int = 1


def screen_gpu(
    spec: ModelSpec,
    hw: HardwareSpec,
    schemes: list[PrecisionScheme],
    tps: list[int],
    query: ScreenQuery,
    layout: ScreenLayout,
) -> list[dict[str, object]]:
    """Every (precision, TP) of one GPU with its verdict on ``query``, and the reasons it fails (if it does)."""
    base = {
        "gpu": hw.id,
        "ep": layout.ep,
        "pp": layout.pp,
        "attention_dp": layout.attention_dp,
        "kv_precision": layout.kv_precision,
        "passes": False,
    }
    rows: list[dict[str, object]] = []
    runnable: list[str] = []
    for scheme in schemes:
        note = unsupported_note(scheme, hw)
        if note is None:
            runnable.append(scheme.name)
        else:
            rows.append(base | {"precision": scheme.name, "tp": None, "reason": note})
    valid_tps: list[int] = []
    for t in tps:
        try:
            Deployment.resolve(spec, hw, tp=t, ep=layout.ep, pp=layout.pp, attention_dp=layout.attention_dp)
        except InfercastError as exc:
            rows.extend(base | {"precision": p, "tp": t, "reason": exc.message} for p in runnable)
        else:
            valid_tps.append(t)
    if not runnable or not valid_tps:
        return rows
    df = sweep(
        models=[spec],
        gpus=[hw],
        precisions=runnable,
        batches=query.batch,
        input_lens=query.input_len,
        output_lens=query.output_len,
        tps=valid_tps,
        eps=layout.ep,
        engines=layout.engine,
        kv_precisions=layout.kv_precision,
        pps=layout.pp,
        attention_dps=layout.attention_dp,
    )
    return rows + [_verdict(spec, hw, r, query, layout) for r in df.itertuples(index=False)]


def _verdict(spec: ModelSpec, hw: HardwareSpec, r: Any, q: ScreenQuery, layout: ScreenLayout) -> dict[str, object]:
    """One swept configuration's row: its latencies, cost, and why it fails ``q`` (memory, TTFT, TPOT)."""
    reasons: list[str] = []
    if not r.fits:
        dep = Deployment.resolve(
            spec,
            hw,
            tp=int(r.tp),
            ep=layout.ep,
            precision=str(r.precision),
            kv_precision=layout.kv_precision,
            engine=layout.engine,
            pp=layout.pp,
            attention_dp=layout.attention_dp,
        )
        mem = memory_budget(dep, context=q.input_len + q.output_len, concurrency=q.batch)
        reasons.append(does_not_fit(mem))
    ttft = r.ttft_last_s - q.ttft_credit_s
    if ttft > q.ttft_s:
        reasons.append(f"TTFT {fmt_time(ttft, sig=3)} > {fmt_time(q.ttft_s, sig=3)}")
    if r.tpot_last_s > q.tpot_s:
        reasons.append(f"TPOT {fmt_time(r.tpot_last_s, sig=3)} > {fmt_time(q.tpot_s, sig=3)}")
    return {
        "gpu": hw.id,
        "precision": str(r.precision),
        "tp": int(r.tp),
        "ep": layout.ep,
        "pp": layout.pp,
        "attention_dp": layout.attention_dp,
        "kv_precision": str(r.kv_precision),
        "passes": not reasons,
        "ttft_s": float(r.ttft_last_s),
        "tpot_s": float(r.tpot_last_s) if r.output_len > 1 else float("nan"),  # one token: undefined
        "e2e_s": float(r.e2e_s),
        "output_throughput_tok_s": float(r.output_throughput_tok_s),
        "fits": bool(r.fits),
        "cost_per_mtok_usd": float(r.cost_per_mtok_usd),
        "reason": "; ".join(reasons),
        "_miss": max(r.ttft_last_s / q.ttft_s, r.tpot_last_s / q.tpot_s) + (0.0 if r.fits else 1e6),
    }
