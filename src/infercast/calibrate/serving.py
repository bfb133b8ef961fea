"""Closed-loop serving benchmarks as published sweeps run them, replayed in the simulator.

A closed-loop point (``vllm bench serve --max-concurrency C --num-prompts 10*C --random-range-ratio 0.8``,
or aiconfigurator's own client) has C clients, each sending its next request when the previous one
finishes; prompt and output lengths are uniform in [r L, L] (r = 0.8 usually; r = 1: fixed lengths); the
reported TTFT and TPOT are means over all 10 x C requests, the ramp-up (C prefills arriving together)
included. With fixed lengths the clients stay synchronised in waves (C requests finish in the same step and
the next C arrive together), so TTFT is about the prefill time of the whole wave; ranged lengths spread the
completions and TTFT drops towards one prefill.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infercast.cost.profile import CostProfile
from infercast.sim.scheduler import engine_scheduler
from infercast.sim.workload import BENCHMARK_RANGE_RATIO, length_range
from infercast.sim.workload.spec import PROMPTS_PER_CLIENT
from infercast.specs.deployment import Deployment

if TYPE_CHECKING:
    from infercast.records.record import Record

SEED = 0
"""One fixed seed for the sampled lengths: predictions are deterministic (the spread between seeds at
10 x C requests is ~1 % of mean TTFT; benchmarks/accuracy.py reports it)."""


@dataclass(frozen=True)
class ClosedLoopResult:
    """Means over all requests of one simulated closed-loop benchmark (seconds)."""

    ttft_mean_s: float
    tpot_mean_s: float
    saturated: bool
    """The KV cache or the sequence limit held requests back (queueing beyond the clients' own wait)."""


def simulate_closed_loop(
    dep: Deployment,
    profile: CostProfile,
    concurrency: int,
    input_len: int,
    output_len: int,
    *,
    range_ratio: float = BENCHMARK_RANGE_RATIO,
    num_requests: int | None = None,
    seed: int = SEED,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    gpu_memory_utilization: float | None = None,
    scheduler: str | None = None,
    overlap_scheduler: bool | None = None,
    warm_up_rounds: int = 0,
) -> ClosedLoopResult:
    """Simulate one closed-loop benchmark point (cached per deployment, profile values, shape and settings: the
    TTFT and TPOT records of one point share a run, and repeated fits re-use unchanged points).

    ``max_num_batched_tokens`` / ``max_num_seqs`` / ``gpu_memory_utilization`` / ``scheduler`` /
    ``overlap_scheduler``: the engine's step budget, sequence limit, KV memory fraction, scheduler and overlap
    in the run (None: the preset's). ``warm_up_rounds``: a client warm-up left out of the means, as aiperf does:
    ``warm_up_rounds x C`` more requests are sent first, and the means cover the requests after them in
    arrival order."""
    from infercast.sim.api import simulate

    key = (
        dep.label,
        dep.engine.id,
        tuple(sorted(profile.flat().items())),
        concurrency,
        input_len,
        output_len,
        range_ratio,
        num_requests,
        seed,
        max_num_batched_tokens,
        max_num_seqs,
        gpu_memory_utilization,
        scheduler,
        overlap_scheduler,
        warm_up_rounds,
    )
    if key in _CACHE:
        return _CACHE[key]
    if len(_CACHE) > CACHE_SIZE:
        _CACHE.clear()

    measured = num_requests or PROMPTS_PER_CLIENT * concurrency
    res = simulate(
        dep.model,
        dep.hardware,
        tp=dep.tp,
        ep=dep.ep,
        attention_dp=dep.attention_dp,
        precision=dep.scheme.name,
        kv_precision=dep.kv_format.name,
        engine=dep.engine.id,
        scheduler=scheduler or engine_scheduler(dep.engine),
        input_len=length_range(input_len, range_ratio),
        output_len=length_range(max(output_len, 2), range_ratio),
        concurrency=concurrency,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        gpu_memory_utilization=gpu_memory_utilization,
        overlap_scheduler=overlap_scheduler,
        num_requests=measured + warm_up_rounds * concurrency,
        seed=seed,
        profile=profile,
    )
    queued = res["queue_s"]["mean"] > 1e-3 or res["preemptions"] > 0
    if warm_up_rounds:
        kept = res.requests().sort_values("arrival_s").iloc[warm_up_rounds * concurrency :]
        ttft, tpot = float(kept.ttft_s.mean()), float(kept.tpot_s.mean())
    else:
        ttft, tpot = res["ttft_s"]["mean"], res["tpot_s"]["mean"]
    out = _CACHE[key] = ClosedLoopResult(ttft, tpot, bool(queued))
    return out


def closed_loop_rates(clients: float, ttft_s: float, tpot_s: float, output_len: int) -> tuple[float, float, float]:
    """Little's law on a closed loop's mean TTFT and TPOT (clients without think time): the requests between
    first and last token, the requests served per second and the output tokens streamed per second."""
    decode_s = max(output_len - 1, 0) * tpot_s
    cycle_s = decode_s + ttft_s
    if cycle_s <= 0 or tpot_s <= 0:
        raise ValueError("closed_loop_rates needs a positive TTFT + decode time and TPOT")
    running = clients * decode_s / cycle_s
    return running, clients / cycle_s, running / tpot_s


def highest_served_rates(records: Iterable[Record]) -> dict[str, dict[str, float]]:
    """Per engine, the most requests/s and output tokens/s one server sustained over the closed-loop points of
    ``records`` (Little's law on each point's mean TTFT and TPOT records; points lacking either are skipped)."""
    points: dict[tuple, dict[str, float]] = {}
    for r in records:
        if r.kind in ("closed_loop_ttft", "closed_loop_tpot"):
            key = (r.engine, r.model, r.gpu, r.precision, r.tp, r.batch, r.input_len, r.output_len)
            points.setdefault(key, {})[r.kind] = r.value_si
    out: dict[str, dict[str, float]] = {}
    for key, m in sorted(points.items()):
        if len(m) < 2:
            continue
        engine, *_, clients, _, output_len = key
        _, requests, tokens = closed_loop_rates(clients, m["closed_loop_ttft"], m["closed_loop_tpot"], output_len)
        top = out.setdefault(engine, {"requests_per_s": 0.0, "output_tokens_per_s": 0.0})
        top["requests_per_s"] = max(top["requests_per_s"], round(requests, 2))
        top["output_tokens_per_s"] = max(top["output_tokens_per_s"], round(tokens, 1))
    return out


def served_concurrency(records: Iterable[Record]) -> dict[str, list[int]]:
    """Per engine, the fewest and the most concurrent clients among the closed-loop points of ``records``."""
    out: dict[str, list[int]] = {}
    for r in records:
        if r.kind in ("closed_loop_ttft", "closed_loop_tpot") and r.batch > 0:
            lo, hi = out.setdefault(r.engine, [r.batch, r.batch])
            out[r.engine] = [min(lo, r.batch), max(hi, r.batch)]
    return dict(sorted(out.items()))


CACHE_SIZE = 20_000
_CACHE: dict[tuple, ClosedLoopResult] = {}
