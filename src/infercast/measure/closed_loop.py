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

from dataclasses import dataclass

from infercast.cost.profile import CostProfile
from infercast.sim.scheduler import engine_scheduler
from infercast.sim.workload import BENCHMARK_RANGE_RATIO, length_range
from infercast.sim.workload.spec import PROMPTS_PER_CLIENT
from infercast.specs.deployment import Deployment

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
    dep: Deployment, profile: CostProfile, concurrency: int, input_len: int, output_len: int,
    *, range_ratio: float = BENCHMARK_RANGE_RATIO, num_requests: int | None = None, seed: int = SEED,
    max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None,
    gpu_memory_utilization: float | None = None,
) -> ClosedLoopResult:  # fmt: skip
    """Simulate one closed-loop benchmark point (cached per deployment, profile values and shape: the TTFT
    and TPOT records of one point share a run, and repeated fits re-use unchanged points);
    ``max_num_batched_tokens`` / ``max_num_seqs`` / ``gpu_memory_utilization``: the engine's step budget,
    sequence limit and KV memory fraction in the run (None: the preset's)."""
    from infercast.sim.api import simulate

    key = (dep.label, dep.engine.id, tuple(sorted(profile.flat().items())), concurrency, input_len, output_len,
           range_ratio, num_requests, seed, max_num_batched_tokens, max_num_seqs, gpu_memory_utilization)  # fmt: skip
    if key in _CACHE:
        return _CACHE[key]
    if len(_CACHE) > CACHE_SIZE:
        _CACHE.clear()

    res = simulate(
        dep.model, dep.hardware, tp=dep.tp, ep=dep.ep, precision=dep.scheme.name, kv_precision=dep.kv_format.name,
        engine=dep.engine.id, scheduler=engine_scheduler(dep.engine),
        input_len=length_range(input_len, range_ratio), output_len=length_range(max(output_len, 2), range_ratio),
        concurrency=concurrency, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
        gpu_memory_utilization=gpu_memory_utilization,
        num_requests=num_requests or PROMPTS_PER_CLIENT * concurrency, seed=seed, profile=profile,
    )  # fmt: skip
    queued = res["queue_s"]["mean"] > 1e-3 or res["preemptions"] > 0
    out = _CACHE[key] = ClosedLoopResult(res["ttft_s"]["mean"], res["tpot_s"]["mean"], bool(queued))
    return out


CACHE_SIZE = 20_000
_CACHE: dict[tuple, ClosedLoopResult] = {}
