"""Replay a simulator workload against the engine: open-loop arrivals (Poisson/gamma/trace timestamps) or
closed-loop clients, in real time (wall clock) or simulated time (cost-model clock), with per-request TTFT,
TPOT, ITL and E2E by ``vllm bench serve``'s definitions (:mod:`infercast.sim.metrics`).

Prompts are random token ids of the workload's lengths; requests whose prompts share block-hash ids share
the tokens of those blocks, so the engine's content-hashed prefix cache finds exactly the prefixes the
simulator's hash-id cache finds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infercast.harness.engine.clock import Clock
from infercast.harness.engine.runtime import Engine, Sequence
from infercast.sim.metrics import GapRecorder, latency_stats, request_metrics
from infercast.sim.workload import Workload


def workload_prompts(work: Workload, vocab_size: int, seed: int = 0) -> list[list[int]]:
    """Token ids of every prompt: each hash block's tokens drawn from a generator seeded by its id (equal
    ids, equal tokens), the rest of the prompt from one seeded by the request's index."""
    hb = work.hash_block_size
    prompts: list[list[int]] = []
    block_tokens: dict[int, list[int]] = {}
    for i, length in enumerate(work.prompt_len.tolist()):
        tokens: list[int] = []
        if work.block_hashes is not None:
            for h in work.block_hashes[i].tolist():
                if h not in block_tokens:
                    block_tokens[h] = np.random.default_rng([seed, 1, h]).integers(0, vocab_size, hb).tolist()
                tokens.extend(block_tokens[h])
        tokens = tokens[:length]
        rest = length - len(tokens)
        if rest:
            tokens.extend(np.random.default_rng([seed, 2, i]).integers(0, vocab_size, rest).tolist())
        prompts.append(tokens)
    return prompts


@dataclass
class EngineRun:
    """One replay's per-request arrays (request-id order), inter-token gaps, steps, and summary."""

    arrival: np.ndarray
    tables: dict[str, np.ndarray]
    gaps: list[float]
    summary: dict[str, Any] = field(default_factory=dict)

    def ttft_tpot_e2e(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = self.tables
        return request_metrics(self.arrival, t["first_token"], t["finish"], t["output"])


def replay(engine: Engine, work: Workload, clock: Clock, *, seed: int = 0) -> EngineRun:
    """Run every request of ``work`` through ``engine``, timing with ``clock``; returns the metrics."""
    n = len(work)
    prompts = workload_prompts(work, engine.model.spec.vocab_size, seed)
    output = work.output_len.tolist()
    hashes = work.block_hashes
    cacheable = [0] * n if hashes is None else [len(h) * work.hash_block_size for h in hashes]
    arrival = np.array(work.arrival, dtype=float)
    overhead = clock.request_overhead_s
    closed = work.closed_loop
    if closed:
        first = min(closed, n)
        arrival[:first] = 0.0
        pending = deque(range(first))
        following = iter(range(first, n))

        def send_next(_: Sequence, t: float) -> None:  # that client sends its next request
            j = next(following, None)
            if j is not None:
                arrival[j] = t
                pending.append(j)

        engine.on_finish = send_next
    else:
        pending = deque(np.argsort(arrival, kind="stable").tolist())
    while True:
        now = clock.now()
        while pending and arrival[pending[0]] + overhead <= now:
            i = pending.popleft()
            engine.add_request(i, prompts[i], output[i], float(arrival[i] + overhead), cacheable[i])
        if engine.idle or not engine.step(clock):
            if pending:
                clock.idle_until(float(arrival[pending[0]] + overhead))
                continue
            break
    engine.on_finish = None
    run = EngineRun(arrival, engine.tables(), list(engine.gaps))
    run.summary = summarize(engine, run)
    return run


def summarize(engine: Engine, run: EngineRun) -> dict[str, Any]:
    """The simulator's summary keys (``infercast.sim.api.summarize``) for an engine run."""
    ttft, tpot, e2e = run.ttft_tpot_e2e()
    t = run.tables
    done = ~np.isnan(t["finish"])
    span = max(float(np.nanmax(t["finish"])) if done.any() else 0.0, 1e-12)
    gaps = GapRecorder()
    gaps.add_many(np.asarray(run.gaps, dtype=float))
    pool = engine.pool
    busy = sum(s.end - s.start for s in engine.steps)
    return {
        "num_requests": len(run.arrival),
        "completed": int(done.sum()),
        "duration_s": span,
        "request_throughput_req_s": int(done.sum()) / span,
        "output_throughput_tok_s": int(t["output"][done].sum()) / span,
        "total_throughput_tok_s": int((t["output"] + t["prompt"])[done].sum()) / span,
        "ttft_s": latency_stats(ttft[done]),
        "tpot_s": latency_stats(tpot[done]),
        "itl_s": gaps.stats(),
        "e2e_s": latency_stats(e2e[done]),
        "queue_s": latency_stats((t["scheduled"] - t["visible"])[done]),
        "preemptions": int(t["preemptions"].sum()),
        "prefix_cache_hit_rate": pool.hit_tokens / pool.lookup_tokens if pool.lookup_tokens else 0.0,
        "steps": len(engine.steps),
        "busy_fraction": busy / span,
    }
