"""The planner's analytic screen: memory fit and unloaded latency of every precision x TP of a GPU.

One vectorised :func:`~infercast.analysis.sweep.sweep` per GPU. ``infercast select`` shows it per GPU
(:mod:`infercast.plan.select`); the planner prunes with it before simulating (:mod:`infercast.plan.prune`), so
a configuration ``select`` fails is never one the planner searches, and both say why in the same words.
"""

from __future__ import annotations

from infercast.analysis.compare import does_not_fit, unsupported_note
from infercast.analysis.sweep import sweep
from infercast.display import fmt_time
from infercast.errors import InfercastError
from infercast.memory import memory_budget
from infercast.specs.deployment import Deployment
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.precision import PrecisionScheme


def screen_gpu(
    spec: ModelSpec,
    hw: HardwareSpec,
    schemes: list[PrecisionScheme],
    tps: list[int],
    *,
    ttft_s: float,
    tpot_s: float,
    input_len: int,
    output_len: int,
    batch: int,
    ep: int,
    kv_precision: str | None,
    engine: str,
    pp: int = 1,
    attention_dp: int = 1,
    ttft_credit_s: float = 0.0,
) -> list[dict[str, object]]:
    """Every (precision, TP) of one GPU with its verdict against ``TTFT <= ttft_s`` and ``TPOT <= tpot_s`` for
    a static batch of ``batch`` requests (no queueing; its last request's TTFT and TPOT), and the reasons it
    fails (if it does); ``pp`` / ``attention_dp``: the layout of each replica. ``ttft_credit_s``: checked is
    TTFT minus this (a lower bound: the planner's floors credit the varying request overhead's mean above its
    median)."""
    rows: list[dict[str, object]] = []
    runnable: list[str] = []
    base = {
        "gpu": hw.id,
        "ep": ep,
        "pp": pp,
        "attention_dp": attention_dp,
        "kv_precision": kv_precision,
        "passes": False,
    }
    for scheme in schemes:
        note = unsupported_note(scheme, hw)
        if note is None:
            runnable.append(scheme.name)
        else:
            rows.append(base | {"precision": scheme.name, "tp": None, "reason": note})
    valid_tps: list[int] = []
    for t in tps:
        try:
            Deployment.resolve(spec, hw, tp=t, ep=ep, pp=pp, attention_dp=attention_dp)
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
        batches=batch,
        input_lens=input_len,
        output_lens=output_len,
        tps=valid_tps,
        eps=ep,
        engines=engine,
        kv_precisions=kv_precision,
        pps=pp,
        attention_dps=attention_dp,
    )
    for r in df.itertuples(index=False):
        reasons: list[str] = []
        if not r.fits:
            dep = Deployment.resolve(
                spec,
                hw,
                tp=int(r.tp),
                ep=ep,
                precision=str(r.precision),
                kv_precision=kv_precision,
                engine=engine,
                pp=pp,
                attention_dp=attention_dp,
            )
            mem = memory_budget(dep, context=input_len + output_len, concurrency=batch)
            reasons.append(does_not_fit(mem))
        if r.ttft_last_s - ttft_credit_s > ttft_s:
            reasons.append(f"TTFT {fmt_time(r.ttft_last_s - ttft_credit_s, sig=3)} > {fmt_time(ttft_s, sig=3)}")
        if r.tpot_last_s > tpot_s:
            reasons.append(f"TPOT {fmt_time(r.tpot_last_s, sig=3)} > {fmt_time(tpot_s, sig=3)}")
        rows.append(
            {
                "gpu": hw.id,
                "precision": str(r.precision),
                "tp": int(r.tp),
                "ep": ep,
                "pp": pp,
                "attention_dp": attention_dp,
                "kv_precision": str(r.kv_precision),
                "passes": not reasons,
                "ttft_s": float(r.ttft_last_s),
                "tpot_s": float(r.tpot_last_s) if r.output_len > 1 else float("nan"),  # one token: undefined
                "e2e_s": float(r.e2e_s),
                "output_throughput_tok_s": float(r.output_throughput_tok_s),
                "fits": bool(r.fits),
                "cost_per_mtok_usd": float(r.cost_per_mtok_usd),
                "reason": "; ".join(reasons),
                "_miss": max(r.ttft_last_s / ttft_s, r.tpot_last_s / tpot_s) + (0.0 if r.fits else 1e6),
            }
        )
    return rows
