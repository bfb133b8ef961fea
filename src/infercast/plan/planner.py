"""``plan``: SLOs and traffic in, the cheapest deployment out — pruned analytically, verified by the simulator.

1. Enumerate the candidate grid (:mod:`~infercast.plan.candidates`) and prune what cannot work whatever the
   load (:mod:`~infercast.plan.prune`: number format, TP, memory, unloaded latency floors).
2. For each survivor, bisect on the simulator for the highest rate one unit serves within the SLOs
   (:mod:`~infercast.plan.search`), in parallel (:mod:`~infercast.plan.executor`).
3. Cost each unit at that rate, size the fleet for the target rate, rank (passing first, cheapest first) and
   mark the Pareto fronts; then simulate the chosen fleet at the target rate, adding units until it passes.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from infercast.errors import InfercastError, require_positive_number
from infercast.plan.candidates import Candidate, CandidateSpace
from infercast.plan.costing import Cutoff, gpu_prices, rank_key, replicas_needed, usd_per_mtok
from infercast.plan.daily import LoadProfile, autoscale, load_profile
from infercast.plan.executor import Executor, Progress, search_family
from infercast.plan.launch import launch_commands
from infercast.plan.pareto import pareto_mask
from infercast.plan.prune import prune_reason, rate_bound, resolve
from infercast.plan.result import PlanResult, rank
from infercast.plan.search import RateSearch, judge, simulate_unit
from infercast.plan.slo import SLOSet
from infercast.plan.traffic import Traffic
from infercast.sim.config import MAX_REPLICAS
from infercast.sim.workload import LengthLike
from infercast.specs.catalog import get_model
from infercast.specs.model import ModelSpec

BOUND_SLACK = 1.25
"""Optimistic max rate of a unit = its offline throughput x 1.25. Offline runs (every request at t = 0) drain
at the end with part-empty batches, so they understate sustained throughput a little; no searched unit has
exceeded 0.95 x its offline throughput in our runs."""
ROUND_FAMILIES = 4
"""Families per search round, whatever the number of workers: the cost bound and the warm start change only
between rounds, so a fixed round size gives every executor and worker count the same plan."""
MAX_FLEET_CHECKS = 4
"""Fleets re-simulated at most (the top one, and the next while re-sizing changes the order)."""
FLEET_EXTRA_UNITS = 3
"""The chosen fleet is re-simulated at the target rate with up to this many units beyond the sized count."""


def _family_key(c: Candidate) -> tuple:
    return (c.gpu, c.precision, c.kv_precision, c.engine, c.ep, c.mode, c.tp, c.decode_tp, c.pp, c.attention_dp)


def _row(
    c: Candidate,
    status: str,
    search: RateSearch | None,
    reason: str,
    price: float,
    target: float | None,
    traffic: Traffic,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "label": c.label,
        "status": status,
        "gpu": c.gpu,
        "precision": c.precision,
        "kv_precision": c.kv_precision or "",
        "mode": c.mode,
        "tp": c.tp,
        "decode_tp": (c.decode_tp or c.tp) if c.disaggregated else None,
        "prefill_instances": c.prefill if c.disaggregated else None,
        "decode_instances": c.decode if c.disaggregated else None,
        "ep": c.ep,
        "pp": c.pp,
        "attention_dp": c.attention_dp,
        "engine": c.engine,
        "max_num_seqs": c.max_num_seqs,
        "max_num_batched_tokens": c.max_num_batched_tokens,
        "gpus_per_unit": c.gpus,
        "usd_per_gpu_hour": price,
        "unit_usd_per_hour": c.gpus * price,
        "capacity_req_s": None,
        "max_rate_req_s": None,
        "replicas": None,
        "total_gpus": None,
        "fleet_usd_per_hour": None,
        "usd_per_mtok_output": None,
        "usd_per_mtok_total": None,
        "output_tok_s_per_gpu": None,
        "tok_s_per_user": None,
        "ttft_p99_s": None,
        "tpot_p90_s": None,
        "tpot_p99_s": None,
        "e2e_p99_s": None,
        "slo_measured_ms": None,
        "slo_attainment": None,
        "binding": reason if status == "pruned" else "",
        "reason": reason,
        "probes": 0,
        "error_band": None,
        "cliff": None,
    }
    if search is None:
        return row
    row["capacity_req_s"] = search.capacity_req_s
    row["probes"] = len(search.probes) + 1  # + the offline capacity run
    row["binding"] = search.binding
    op = search.operating_point
    if search.max_rate_req_s is None or op is None:
        lowest = f"{_lowest(search):.3g}"
        row["reason"] = search.error or f"{search.binding} fails at every rate down to {lowest} req/s"
        return row
    unit_h = c.gpus * price
    row.update(
        max_rate_req_s=search.max_rate_req_s,
        usd_per_mtok_output=usd_per_mtok(unit_h, op["output_tok_s"]),
        usd_per_mtok_total=usd_per_mtok(unit_h, op["output_tok_s"] + op["input_tok_s"]),
        output_tok_s_per_gpu=op["output_tok_s_per_gpu"],
        tok_s_per_user=op["tok_s_per_user"],
        ttft_p99_s=op["ttft_p99_s"],
        tpot_p90_s=op["tpot_p90_s"],
        tpot_p99_s=op["tpot_p99_s"],
        e2e_p99_s=op["e2e_p99_s"],
        slo_measured_ms={k: v * 1e3 for k, v in op["slo_measured_s"].items()},
        slo_attainment=op["slo_attainment"],
        error_band=op["error_band"],
        cliff=op.get("cliff"),
    )
    if target is not None:
        n = replicas_needed(target, search.max_rate_req_s)
        row.update(replicas=n, total_gpus=n * c.gpus, fleet_usd_per_hour=n * unit_h)
    return row


def _phase(progress: Progress | None, name: str):
    return None if progress is None else (lambda done, total: progress(name, done, total))


def _search(
    ex: Executor,
    spec: ModelSpec,
    traffic: Traffic,
    slos: SLOSet,
    survivors: list[Candidate],
    price: dict[str, float],
    rate: float | None,
    exhaustive: bool,
    progress: Progress | None,
) -> tuple[dict[Candidate, RateSearch], dict[Candidate, str], int]:
    """Branch and bound over families, cheapest roofline bound first, in rounds of a few families per worker.

    Each family's first member warm-starts from the median max rate / offline throughput of earlier rounds.
    Before a round, members whose roofline bound (:func:`~infercast.plan.prune.rate_bound`) cannot beat the
    best unit verified so far are cut; inside a task, members whose offline throughput x :data:`BOUND_SLACK`
    cannot are. The best only changes between rounds, so the outcome does not depend on the executor or on
    task timing. ``exhaustive`` searches everything.
    """
    roof = {c: rate_bound(spec, c, traffic) for c in survivors}
    key = {c: rank_key(c.gpus, price[c.gpu], rate, roof[c], traffic.mean_output) for c in survivors}
    fams: dict[tuple, list[Candidate]] = defaultdict(list)
    for c in survivors:
        fams[_family_key(c)].append(c)
    families = sorted(fams.values(), key=lambda f: min(key[c] for c in f))
    searches: dict[Candidate, RateSearch] = {}
    bounded: dict[Candidate, str] = {}
    best: tuple[float, float] | None = None
    sims = 0
    per_round = ROUND_FAMILIES
    total = len(survivors)
    while families:
        if best is not None and not exhaustive:
            kept = []
            for fam in families:
                for c in fam:
                    if key[c] > best:
                        bounded[c] = f"roofline bound: cannot beat the best unit even at {roof[c]:.3g} req/s"
                rest = [c for c in fam if c not in bounded]
                if rest:
                    kept.append(rest)
            families = kept
        batch, families = families[:per_round], families[per_round:]
        if not batch:
            break
        cutoff = None
        if best is not None and not exhaustive:
            cutoff = Cutoff(best, rate, price, traffic.mean_output, BOUND_SLACK)
        ratios = [r.hint for r in searches.values() if r.hint]
        hint = float(np.median(ratios)) if ratios else None  # from earlier rounds only: deterministic
        found = ex.map(
            search_family, [(fam, cutoff, hint) for fam in batch], spec, traffic, slos, weights=[len(f) for f in batch]
        )
        for fam_res in found:
            for r in fam_res:
                sims += len(r.probes) + (r.capacity_req_s > 0)  # + its offline run
                if r.bounded:
                    bounded[r.candidate] = r.bounded
                    continue
                searches[r.candidate] = r
                if r.max_rate_req_s:
                    k = rank_key(r.candidate.gpus, price[r.candidate.gpu], rate, r.max_rate_req_s, traffic.mean_output)
                    best = k if best is None or k < best else best
        if progress:
            progress("search", len(searches) + len(bounded), total)
    return searches, bounded, sims


def _lowest(search: RateSearch) -> float:
    return min((p.rate_req_s for p in search.probes), default=0.0)


def _mark_fronts(df: pd.DataFrame) -> pd.DataFrame:
    ok = (df["status"] == "pass").to_numpy()
    num = df
    tput = pd.to_numeric(num["output_tok_s_per_gpu"], errors="coerce").to_numpy(float)
    user = pd.to_numeric(num["tok_s_per_user"], errors="coerce").to_numpy(float)
    cost = pd.to_numeric(num["usd_per_mtok_output"], errors="coerce").to_numpy(float)
    lat = pd.to_numeric(num["e2e_p99_s"], errors="coerce").to_numpy(float)
    a = np.zeros(len(df), bool)
    b = np.zeros(len(df), bool)
    if ok.any():
        a[ok] = pareto_mask(user[ok], tput[ok], maximize_x=True, maximize_y=True)
        b[ok] = pareto_mask(lat[ok], cost[ok], maximize_x=False, maximize_y=False)
    df["pareto_throughput"] = a
    df["pareto_cost"] = b
    return df


def verify_fleet(model: ModelSpec, c: Candidate, traffic: Traffic, slo: SLOSet, replicas: int) -> dict[str, Any]:
    """Simulate ``replicas`` units of ``c`` at the target rate (each unit sees as many requests as a probe);
    add units until the fleet passes (up to :data:`FLEET_EXTRA_UNITS` more)."""
    target = traffic.check_rate()
    if replicas + FLEET_EXTRA_UNITS > MAX_REPLICAS:
        raise InfercastError(
            f"{target:g} req/s needs {float(replicas):.3g} units of {c.label}; a fleet is verified by simulating "
            f"it, up to {MAX_REPLICAS:,} units: lower the rate (the Python API's plan(verify=False) skips the check)",
            field="rate",
        )
    tried = []
    for n in range(replicas, replicas + FLEET_EXTRA_UNITS + 1):
        res = simulate_unit(model, c, traffic, target, units=n)
        check = judge(res, slo)
        s = res.summary
        tried.append(
            {
                "replicas": n,
                "passes": check.passes,
                "binding": check.binding,
                "slo_measured_ms": {k: v * 1e3 for k, v in check.measured_s.items()},
                "slo_attainment": check.attainment,
                "goodput_req_s": _goodput(res, slo),
                "request_throughput_req_s": s["request_throughput_req_s"],
            }
        )
        if check.passes:
            break
    last = tried[-1]
    return {"rate_req_s": target, "sized_replicas": replicas, **last, "tried": tried}


def _verify_top(
    spec: ModelSpec, traffic: Traffic, slos: SLOSet, table: pd.DataFrame, by_label: dict[str, Candidate]
) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """Re-simulate the top passing unit as a fleet at the target rate; when it needs more units than sized,
    update its row, re-rank and check the new top, until the top row is verified (or tries run out)."""
    fleet = None
    verified: set[str] = set()
    for _ in range(MAX_FLEET_CHECKS):
        passing = table[table["status"] == "pass"]
        if passing.empty:
            break
        top = passing.iloc[0]
        if top["label"] in verified:
            break
        c = by_label[top["label"]]
        fleet = verify_fleet(spec, c, traffic, slos, int(top["replicas"]))
        verified.add(top["label"])
        i = table.index[table["label"] == top["label"]][0]
        n = fleet["replicas"]
        table.loc[i, ["replicas", "total_gpus", "fleet_usd_per_hour"]] = [n, n * c.gpus, n * top["unit_usd_per_hour"]]
        if not fleet["passes"]:
            table.loc[i, "status"] = "fail"
            table.loc[i, "reason"] = f"fleet of {n} units misses the SLO at the target rate: {fleet['binding']}"
        table = _mark_fronts(rank(table.drop(columns=["rank"]), by_fleet=True))
    return table, fleet


def _goodput(res: Any, slo: SLOSet) -> float:
    """Requests/s meeting every limit of ``slo`` (each term's limit, per request), over the run."""
    from infercast.sim.metrics import request_metrics

    tb = res.table
    ttft, tpot, e2e = request_metrics(tb.arrival, tb.first_token, tb.finish, tb.output)
    ok = ~np.isnan(tb.finish)
    for metric, v in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e)):
        limit = slo.limit(metric)
        if limit is not None:
            ok &= ~(v > limit)
    return float(ok.sum()) / res.summary["duration_s"]


def plan(
    model: str | ModelSpec,
    gpus: str | Sequence[str],
    *,
    slo: str | Sequence[str] | SLOSet,
    rate: float | None = None,
    input_len: LengthLike | None = None,
    output_len: LengthLike | None = None,
    trace: str | None = None,
    attainment: float | None = None,
    precisions: str | Sequence[str] | None = None,
    tps: int | Sequence[int] | None = None,
    eps: int | Sequence[int] | None = None,
    kv_precisions: str | Sequence[str] | None = None,
    engines: str | Sequence[str] | None = None,
    max_num_seqs: int | Sequence[int] | None = None,
    max_num_batched_tokens: int | Sequence[int] | None = None,
    aggregated: bool = True,
    disagg: str | Sequence[str | tuple[int, int]] | None = None,
    decode_tps: int | Sequence[int] | None = None,
    pps: int | Sequence[int] | None = None,
    attention_dps: int | Sequence[int] | None = None,
    prices: Mapping[str, float] | None = None,
    num_requests: int | None = None,
    arrival: str | None = None,
    burstiness: float = 1.0,
    seed: int = 0,
    executor: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    verify: bool = True,
    exhaustive: bool = False,
    daily: str | LoadProfile | None = None,
    scale_up_delay_s: float = 300.0,
    stream_token_s: float | None = None,
    progress: Progress | None = None,
) -> PlanResult:
    """Search every GPU x precision x TP (x attention-DP x PP with ``attention_dps`` / ``pps``) x engine knob
    (x prefill:decode ratio with ``disagg``, e.g. "1:1,1:2") for the cheapest deployment serving ``rate`` req/s
    within ``slo`` (``"ttft:p99:200ms tpot:p90:50ms"``).

    Requests: ``input_len``/``output_len`` (numbers or distributions) or a ``trace``; each probe replays
    ``num_requests`` of them. Without ``rate`` only the max rate per unit is searched (ranked by $/Mtok).
    ``daily`` (``"diurnal"``, ``"diurnal:0.25"``, a CSV of rates or a trace; :mod:`~infercast.plan.daily`):
    the fleet is sized for its peak and the chosen unit replayed through an autoscaler with ``scale_up_delay_s``.
    ``executor``: local (processes on ``workers`` cores), serial, or ray (``ray_address`` or a local
    instance). Unless ``exhaustive``, a candidate whose bound (its roofline rate, or its offline throughput x
    :data:`BOUND_SLACK`) cannot beat the best unit verified before is not searched (status ``bounded``): the
    choice is the same, the Pareto fronts cover the searched candidates only. ``stream_token_s``: every
    candidate's API-server front-end, seconds per streamed token (0: none; None: each engine profile's). Returns a
    :class:`~infercast.plan.result.PlanResult`.
    """
    t0 = time.perf_counter()
    spec = get_model(model)
    profile = None
    if rate is not None:
        rate = require_positive_number("rate", rate)
    if daily is not None:
        profile = daily if isinstance(daily, LoadProfile) else load_profile(daily, peak=rate)
        rate = profile.peak if rate is None else rate
    slos = slo if isinstance(slo, SLOSet) else SLOSet.parse(slo, attainment)
    if isinstance(slo, SLOSet) and attainment is not None:
        slos = SLOSet(slos.terms, attainment)
    traffic_args: dict[str, Any] = {
        "input_len": input_len,
        "output_len": output_len,
        "trace": trace,
        "rate": rate,
        "arrival": arrival,
        "burstiness": burstiness,
        "seed": seed,
    }
    if num_requests is not None:
        traffic_args["num_requests"] = num_requests
    traffic = Traffic(**traffic_args)
    space = CandidateSpace.build(
        gpus,
        precisions=precisions,
        tps=tps,
        eps=eps,
        kv_precisions=kv_precisions,
        engines=engines,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        aggregated=aggregated,
        ratios=disagg,
        decode_tps=decode_tps,
        pps=pps,
        attention_dps=attention_dps,
    )
    price = gpu_prices(list(space.gpus), prices)
    candidates = [resolve(spec, c) for c in space.enumerate()]
    candidates = list(dict.fromkeys(candidates))
    if stream_token_s is not None:
        stream_token_s = require_positive_number("stream_token_s", stream_token_s, allow_zero=True)
        candidates = [replace(c, stream_token_s=stream_token_s) for c in candidates]

    pruned: dict[Candidate, str] = {}
    for c in candidates:
        reason = prune_reason(spec, c, traffic, slos)
        if reason is not None:
            pruned[c] = reason
    survivors = [c for c in candidates if c not in pruned]
    t1 = time.perf_counter()
    with Executor(executor, workers, ray_address) as ex:
        searches, bounded, sims = _search(ex, spec, traffic, slos, survivors, price, rate, exhaustive, progress)
    t3 = time.perf_counter()

    rows = []
    for c in candidates:
        if c in pruned:
            rows.append(_row(c, "pruned", None, pruned[c], price[c.gpu], rate, traffic))
        elif c in bounded:
            rows.append(_row(c, "bounded", None, bounded[c], price[c.gpu], rate, traffic))
        else:
            s = searches[c]
            rows.append(_row(c, "pass" if s.max_rate_req_s else "fail", s, "", price[c.gpu], rate, traffic))
    table = _mark_fronts(rank(pd.DataFrame(rows), by_fleet=rate is not None))
    by_label = {c.label: c for c in candidates}

    chosen, fleet, launch, day = None, None, [], None
    if verify and rate is not None:
        table, fleet = _verify_top(spec, traffic, slos, table, by_label)
    passing = table[table["status"] == "pass"]
    if not passing.empty:
        chosen = _clean(passing.iloc[0].to_dict())
        replicas = int(chosen["replicas"]) if rate is not None else 1
        launch = launch_commands(spec, by_label[chosen["label"]], replicas)
        if profile is not None:
            per_unit = chosen["max_rate_req_s"]
            if fleet is not None and rate is not None and fleet["replicas"] > fleet["sized_replicas"]:
                per_unit = min(per_unit, rate / replicas)  # the fleet needed more units: use what it verified
            day = autoscale(profile, per_unit, chosen["unit_usd_per_hour"], scale_up_delay_s)
    t4 = time.perf_counter()
    sims += len(fleet["tried"]) if fleet else 0  # + the (last) fleet check
    stats = {
        "candidates": len(candidates),
        "pruned": len(pruned),
        "bounded": len(bounded),
        "searched": len(searches),
        "passing": int((table["status"] == "pass").sum()),
        "simulations": sims,
        "seconds_total": t4 - t0,
        "seconds_prune": t1 - t0,
        "seconds_search": t3 - t1,
        "seconds_fleet": t4 - t3,
        "candidates_per_second": len(candidates) / max(t4 - t0, 1e-9),
        "simulations_per_second": sims / max(t3 - t1, 1e-9),
        "executor": executor,
        "exhaustive": exhaustive,
    }
    settings = {
        "model": spec.id,
        "slo": slos.to_dict(),
        "slo_text": slos.describe(),
        "rate_req_s": rate,
        "traffic": traffic.describe(),
        "probe_requests": traffic.num_requests,
        "seed": seed,
        "mean_input_tokens": traffic.mean_input,
        "mean_output_tokens": traffic.mean_output,
        "prices_usd_per_gpu_hour": price,
        "stream_token_s": stream_token_s,
    }
    return PlanResult(table, chosen, settings, stats, fleet, launch, day)


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in row.items():
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and np.isnan(v):
            v = None
        out[k] = v
    return out


def candidate_of(row: Mapping[str, Any]) -> Candidate:
    """The :class:`Candidate` a table row describes (to re-simulate it)."""
    dis = row.get("mode") == "disagg"

    def opt(key: str) -> int | None:
        v = row.get(key)
        return None if v is None or (isinstance(v, float) and np.isnan(v)) else int(v)

    c = Candidate(
        gpu=row["gpu"],
        precision=row["precision"],
        tp=int(row["tp"]),
        ep=int(row["ep"]),
        kv_precision=row.get("kv_precision") or None,
        engine=row["engine"],
        max_num_seqs=opt("max_num_seqs"),
        max_num_batched_tokens=opt("max_num_batched_tokens"),
        prefill=(opt("prefill_instances") or 0) if dis else 0,
        decode=(opt("decode_instances") or 0) if dis else 0,
        decode_tp=opt("decode_tp") if dis else None,
        pp=opt("pp") or 1,
        attention_dp=opt("attention_dp") or 1,
    )
    if c.label != row["label"]:
        raise InfercastError(f"row does not describe a candidate ({c.label!r} != {row['label']!r})", field="row")
    return c
