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

from infercast.errors import InfercastError
from infercast.plan.candidates import Candidate
from infercast.plan.costing import Cutoff, gpu_prices, rank_key, replicas_needed, usd_per_mtok
from infercast.plan.daily import autoscale
from infercast.plan.executor import Executor, search_family
from infercast.plan.launch import launch_commands
from infercast.plan.pareto import pareto_mask
from infercast.plan.prune import prune_reason, rate_bound, resolve
from infercast.plan.request import Execution, PlanRequest, plan_request
from infercast.plan.result import PlanResult, rank
from infercast.plan.search import RateSearch, judge, simulate_unit
from infercast.plan.slo import SLOSet
from infercast.plan.traffic import Traffic
from infercast.sim.config import MAX_REPLICAS
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


def _search(
    ex: Executor, spec: ModelSpec, request: PlanRequest, survivors: list[Candidate], price: dict[str, float]
) -> tuple[dict[Candidate, RateSearch], dict[Candidate, str], int]:
    """Branch and bound over families, cheapest roofline bound first, in rounds of a few families per worker.

    Each family's first member warm-starts from the median max rate / offline throughput of earlier rounds.
    Before a round, members whose roofline bound (:func:`~infercast.plan.prune.rate_bound`) cannot beat the
    best unit verified so far are cut; inside a task, members whose offline throughput x :data:`BOUND_SLACK`
    cannot are. The best only changes between rounds, so the outcome does not depend on the executor or on
    task timing. ``exhaustive`` searches everything.
    """
    traffic, slos, rate = request.traffic, request.slo, request.traffic.rate
    exhaustive, progress = request.execution.exhaustive, request.execution.progress
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
    model: str | ModelSpec | PlanRequest,
    gpus: str | Sequence[str] | None = None,
    *,
    slo: str | Sequence[str] | SLOSet | None = None,
    **options: Any,
) -> PlanResult:
    """Search every GPU x precision x TP (x attention-DP x PP with ``attention_dps`` / ``pps``) x engine knob
    (x prefill:decode ratio with ``disagg``, e.g. "1:1,1:2") for the cheapest deployment serving ``rate`` req/s
    within ``slo`` (``"ttft:p99:200ms tpot:p90:50ms"``). ``plan(request)`` runs a :class:`PlanRequest`;
    ``plan(model, gpus, slo=..., **options)`` builds one from the keywords of
    :data:`~infercast.plan.request.KEYWORDS` (:func:`~infercast.plan.request.plan_request`).

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
    if isinstance(model, PlanRequest):
        if gpus is not None or slo is not None or options:
            raise InfercastError("give a PlanRequest alone, or a model, gpus and slo with keywords", field="request")
        return run_plan(model)
    if gpus is None:
        raise InfercastError("needs at least one GPU", field="gpus")
    if slo is None:
        raise InfercastError("expected terms like 'ttft:p99:200ms', got None", field="slo")
    return run_plan(plan_request(model, gpus, slo=slo, **options))


def run_plan(request: PlanRequest) -> PlanResult:
    """Screen the grid analytically, search the survivors on the simulator, rank, verify the chosen fleet."""
    clock = [time.perf_counter()]
    spec = get_model(request.model)
    price = gpu_prices(list(request.space.gpus), request.prices)
    candidates, pruned = _screen(spec, request)
    survivors = [c for c in candidates if c not in pruned]
    clock.append(time.perf_counter())
    run = request.execution
    with Executor(run.executor, run.workers, run.ray_address) as ex:
        searches, bounded, sims = _search(ex, spec, request, survivors, price)
    clock.append(time.perf_counter())
    rate = request.traffic.rate
    rows = [_row(c, *_verdict(c, pruned, bounded, searches), price[c.gpu], rate, request.traffic) for c in candidates]
    table = _mark_fronts(rank(pd.DataFrame(rows), by_fleet=rate is not None))
    by_label = {c.label: c for c in candidates}
    fleet = None
    if run.verify and rate is not None:
        table, fleet = _verify_top(spec, request.traffic, request.slo, table, by_label)
    chosen, launch, day = _choose(spec, request, table, by_label, fleet)
    clock.append(time.perf_counter())
    sims += len(fleet["tried"]) if fleet else 0  # + the (last) fleet check
    counts = {"candidates": len(candidates), "pruned": len(pruned), "bounded": len(bounded)}
    counts |= {"searched": len(searches), "passing": int((table["status"] == "pass").sum()), "simulations": sims}
    stats = counts | _timing(clock, len(candidates), sims, run)
    return PlanResult(table, chosen, _settings(spec, request, price), stats, fleet, launch, day)


def _screen(spec: ModelSpec, request: PlanRequest) -> tuple[list[Candidate], dict[Candidate, str]]:
    """Every distinct candidate of the grid (precision resolved, the front-end set) and why each pruned one is."""
    candidates = list(dict.fromkeys(resolve(spec, c) for c in request.space.enumerate()))
    if request.stream_token_s is not None:
        candidates = [replace(c, stream_token_s=request.stream_token_s) for c in candidates]
    pruned: dict[Candidate, str] = {}
    for c in candidates:
        reason = prune_reason(spec, c, request.traffic, request.slo)
        if reason is not None:
            pruned[c] = reason
    return candidates, pruned


def _verdict(
    c: Candidate, pruned: dict[Candidate, str], bounded: dict[Candidate, str], searches: dict[Candidate, RateSearch]
) -> tuple[str, RateSearch | None, str]:
    """(status, search, reason) of one candidate for its table row."""
    if c in pruned:
        return "pruned", None, pruned[c]
    if c in bounded:
        return "bounded", None, bounded[c]
    s = searches[c]
    return ("pass" if s.max_rate_req_s else "fail"), s, ""


def _choose(
    spec: ModelSpec,
    request: PlanRequest,
    table: pd.DataFrame,
    by_label: dict[str, Candidate],
    fleet: dict[str, Any] | None,
) -> tuple[dict[str, Any] | None, list[str], Any]:
    """The chosen row (the top passing one), its launch command and, for a daily load, the autoscaling what-if."""
    passing = table[table["status"] == "pass"]
    if passing.empty:
        return None, [], None
    rate = request.traffic.rate
    chosen = _clean(passing.iloc[0].to_dict())
    replicas = int(chosen["replicas"]) if rate is not None else 1
    launch = launch_commands(spec, by_label[chosen["label"]], replicas)
    if request.daily is None:
        return chosen, launch, None
    per_unit = chosen["max_rate_req_s"]
    if fleet is not None and rate is not None and fleet["replicas"] > fleet["sized_replicas"]:
        per_unit = min(per_unit, rate / replicas)  # the fleet needed more units: use what it verified
    day = autoscale(request.daily.profile, per_unit, chosen["unit_usd_per_hour"], request.daily.scale_up_delay_s)
    return chosen, launch, day


def _timing(clock: list[float], candidates: int, sims: int, run: Execution) -> dict[str, Any]:
    """Seconds per phase (``clock``: start, screened, searched, done) and throughputs."""
    t0, t1, t3, t4 = clock
    return {
        "seconds_total": t4 - t0,
        "seconds_prune": t1 - t0,
        "seconds_search": t3 - t1,
        "seconds_fleet": t4 - t3,
        "candidates_per_second": candidates / max(t4 - t0, 1e-9),
        "simulations_per_second": sims / max(t3 - t1, 1e-9),
        "executor": run.executor,
        "exhaustive": run.exhaustive,
    }


def _settings(spec: ModelSpec, request: PlanRequest, price: dict[str, float]) -> dict[str, Any]:
    """What was asked, as the result reports it."""
    traffic, slos = request.traffic, request.slo
    return {
        "model": spec.id,
        "slo": slos.to_dict(),
        "slo_text": slos.describe(),
        "rate_req_s": traffic.rate,
        "traffic": traffic.describe(),
        "probe_requests": traffic.num_requests,
        "seed": traffic.seed,
        "mean_input_tokens": traffic.mean_input,
        "mean_output_tokens": traffic.mean_output,
        "prices_usd_per_gpu_hour": price,
        "stream_token_s": request.stream_token_s,
    }


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
