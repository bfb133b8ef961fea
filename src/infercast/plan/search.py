"""Highest request rate one unit serves within the SLOs, by bisection on the simulator.

The bracket starts from the unit's offline throughput (every request at t = 0: what it sustains with full
batches, an upper bound on any rate it keeps up with). The first probe is a warm start — a fraction of that
capacity taken from the unit's family member searched just before (same deployment, other knobs), else
:data:`DEFAULT_HINT` — and the bracket is closed geometrically to a relative width of ``rel_tol``. A
saturated probe (the unit falls behind) stops the upward search at once and moves the next probe below the
rate it actually served; a unit that fails at a small fraction of its capacity is given up early.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from infercast.analysis.error_bands import FRONT_END_BINDS
from infercast.cost.front_end import with_front_end
from infercast.plan.candidates import Candidate
from infercast.plan.slo import SLOCheck, SLOSet
from infercast.plan.traffic import Traffic
from infercast.sim.api import SimulationResult, simulate
from infercast.sim.config import ClusterConfig, DisaggConfig, EngineConfig, SimulationConfig
from infercast.sim.workload import WorkloadSpec, retime
from infercast.specs.deployment import Deployment
from infercast.specs.model import ModelSpec

DEFAULT_HINT = 0.6
"""First probe without a warm start, as a fraction of offline throughput (SLO-bound rates of chat-like loads
land at roughly 0.4-0.9 of it in our runs; any value works, a good one saves probes)."""
REL_TOL = 0.03
"""Bisection stops when the failing rate is within 3 % of the passing one (so +10 % is always outside)."""
FLOOR_FRACTION = 0.02
"""A unit failing at 2 % of its capacity is given up: its latency floor, not load, breaks the SLO."""
MAX_PROBES = 16
COLD_STEP = 1.4
"""First step up or down without a warm start (squared after each move the same way, up to 1.96)."""
WARM_STEP = 1.06
"""Step from a warm start while the bracket is open on one side (a good hint lands within a step or two)."""


@dataclass
class Probe:
    rate_req_s: float
    passes: bool
    check: SLOCheck
    served_rate_req_s: float | None


@dataclass
class RateSearch:
    """What a search found for one candidate: the max rate (None: none passes) and its operating point."""

    candidate: Candidate
    capacity_req_s: float
    max_rate_req_s: float | None
    operating_point: dict[str, Any] | None
    binding: str
    """The objective that fails just above the max rate (or at every rate tried)."""
    probes: list[Probe] = field(default_factory=list)
    error: str | None = None
    bounded: str | None = None
    """Why it was not searched: even its bound cannot beat the best unit found before (branch and bound)."""

    @property
    def hint(self) -> float | None:
        """max rate / capacity: the warm start for the next member of the family."""
        if self.max_rate_req_s is None or self.capacity_req_s <= 0:
            return None
        return self.max_rate_req_s / self.capacity_req_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "capacity_req_s": self.capacity_req_s,
            "max_rate_req_s": self.max_rate_req_s,
            "binding": self.binding,
            "probes": [(p.rate_req_s, p.passes, p.check.binding) for p in self.probes],
        }


def unit_config(model: str | ModelSpec, c: Candidate, traffic: Traffic) -> SimulationConfig:
    """The simulation of one unit of ``c`` on the probe requests; probes vary it with :func:`dataclasses.replace`."""
    dep = Deployment.resolve(
        model,
        c.gpu,
        tp=c.tp,
        ep=c.ep,
        precision=c.precision,
        kv_precision=c.kv_precision,
        engine=c.engine,
        pp=c.pp,
        attention_dp=c.attention_dp,
    )
    engine = EngineConfig(max_num_seqs=c.max_num_seqs, max_num_batched_tokens=c.max_num_batched_tokens)
    cluster = ClusterConfig()
    if c.disaggregated:
        cluster = ClusterConfig(disagg=DisaggConfig(c.prefill, c.decode, c.tp, c.decode_tp or c.tp))
    return SimulationConfig(
        dep,
        WorkloadSpec(workload=traffic.requests, seed=traffic.seed),
        engine,
        cluster,
        profile=with_front_end(None, dep, c.stream_token_s),
    )


def simulate_unit(
    model: str | ModelSpec,
    c: Candidate,
    traffic: Traffic,
    rate: float | None,
    units: int = 1,
    base: SimulationConfig | None = None,
) -> SimulationResult:
    """``units`` copies of candidate ``c`` serving the probe requests at ``rate`` (None: offline). A fleet of
    several units gets the requests ``units`` times over, so each unit sees as many as a single-unit probe.
    ``base``: :func:`unit_config` of ``c``, when the caller already has it."""
    base = unit_config(model, c, traffic) if base is None else base
    if rate is None:
        work = traffic.offline() if units == 1 else retime(traffic.requests.tile(units), offline=True)
    else:
        work = traffic.at_rate(rate, copies=units)
    cluster = base.cluster
    if units > 1:
        d = cluster.disagg
        cluster = (
            replace(cluster, replicas=units)
            if d is None
            else replace(
                cluster, disagg=replace(d, prefill_instances=c.prefill * units, decode_instances=c.decode * units)
            )
        )
    return simulate(replace(base, workload=WorkloadSpec(workload=work, seed=traffic.seed), cluster=cluster))


def judge(result: SimulationResult, slo: SLOSet) -> SLOCheck:
    tb = result.table
    return slo.check(tb.arrival, tb.first_token, tb.finish, tb.output, bool(result.summary["saturated"]))


def failure_binding(check: SLOCheck, result: SimulationResult) -> str:
    """What fails in a failing probe: its worst SLO term or ``saturated``, marked ``front-end`` where the API
    server's front-end, not the GPUs, ran out (busy at least :data:`FRONT_END_BINDS` of the run)."""
    busy = result.summary.front_end_busy_fraction
    if busy is None or busy < FRONT_END_BINDS:
        return check.binding
    return "front-end" if check.saturated else f"{check.binding} (front-end)"


def operating_point(
    result: SimulationResult, check: SLOCheck, rate: float, traffic: Traffic, c: Candidate
) -> dict[str, Any]:
    """The figures a plan reports at a unit's max rate."""
    s = result.summary
    out_tok_s = rate * traffic.mean_output
    tpot = s["tpot_s"]
    return {
        "rate_req_s": rate,
        "output_tok_s": out_tok_s,
        "input_tok_s": rate * traffic.mean_input,
        "output_tok_s_per_gpu": out_tok_s / c.gpus,
        "tok_s_per_user": 1.0 / tpot["p50"] if tpot.get("p50") else math.nan,
        "ttft_p50_s": s["ttft_s"]["p50"],
        "ttft_p90_s": s["ttft_s"]["p90"],
        "ttft_p99_s": s["ttft_s"]["p99"],
        "tpot_p50_s": tpot["p50"],
        "tpot_p90_s": tpot["p90"],
        "tpot_p99_s": tpot["p99"],
        "e2e_p50_s": s["e2e_s"]["p50"],
        "e2e_p99_s": s["e2e_s"]["p99"],
        "slo_measured_s": check.measured_s,
        "slo_attainment": check.attainment,
        "headroom": check.headroom,
        "mean_decode_batch": s["mean_decode_batch"],
        "busy_fraction": s["busy_fraction"],
        "error_band": _band(result),
        "cliff": result.cliff["message"] if result.cliff else None,
    }


def _band(result: SimulationResult) -> dict[str, Any] | None:
    """The simulator's expected error in this regime (cross-validated bands and warnings), when it gives one."""
    conf = getattr(result, "confidence", None)
    return conf.to_dict() if conf is not None else None


def offline_capacity(
    model: str | ModelSpec, c: Candidate, traffic: Traffic, base: SimulationConfig | None = None
) -> float:
    """Requests/s one unit completes with every probe request queued at t = 0 (full batches throughout)."""
    return float(simulate_unit(model, c, traffic, None, base=base).summary["request_throughput_req_s"])


def search_rate(
    model: str | ModelSpec,
    c: Candidate,
    traffic: Traffic,
    slo: SLOSet,
    *,
    hint: float | None = None,
    capacity: float | None = None,
    rel_tol: float = REL_TOL,
    hopeless: Callable[[float], bool] | None = None,
) -> RateSearch:
    """Bisection for the highest rate at which ``c`` passes ``slo`` (see the module docstring); ``capacity``:
    its :func:`offline_capacity` when already known. ``hopeless(rate)``: True when a unit serving less than
    ``rate`` cannot matter (branch and bound); while nothing has passed, a failing probe at such a rate ends
    the search (``bounded``)."""
    base = unit_config(model, c, traffic)
    if capacity is None:
        capacity = offline_capacity(model, c, traffic, base)
    search = RateSearch(c, capacity, None, None, "")
    lo: float = 0.0
    hi: float = math.inf
    best: tuple[SimulationResult, SLOCheck] | None = None
    fail_binding = ""
    rate = capacity * (hint if hint else DEFAULT_HINT)
    floor = capacity * FLOOR_FRACTION
    step = COLD_STEP if hint is None else WARM_STEP
    for _ in range(MAX_PROBES):
        res = simulate_unit(model, c, traffic, rate, base=base)
        check = judge(res, slo)
        served = res.summary.get("served_rate_req_s")
        search.probes.append(Probe(rate, check.passes, check, served))
        if check.passes:
            lo, best = rate, (res, check)
        else:
            hi, fail_binding = rate, failure_binding(check, res)
        if hi < math.inf and lo > 0 and hi / lo <= 1 + rel_tol:
            break
        if lo == 0:  # nothing passed yet: step down, below what a saturated probe actually served
            if hopeless is not None and hopeless(rate):
                search.bounded = f"cost bound: fails at {rate:.3g} req/s, and even that rate cannot beat the best unit"
                break
            if rate <= floor:
                break
            nxt = rate / step
            if check.saturated and served:
                nxt = min(nxt, max(0.9 * served, rate / COLD_STEP**2))
            rate = max(nxt, floor)
            step = min(step * step, COLD_STEP**2)  # a hint that was off: widen the steps
        elif hi == math.inf:  # everything passed so far: step up
            rate = rate * step
            step = min(step * step, COLD_STEP**2)
            if rate > 4 * capacity:
                break
        else:
            rate = math.sqrt(lo * hi)
    if best is not None:
        res, check = best
        search.max_rate_req_s = lo
        search.operating_point = operating_point(res, check, lo, traffic, c)
        search.binding = fail_binding or "none within 4x offline throughput"
    else:
        search.binding = fail_binding
    return search
