"""Serving benchmarks replayed in the simulator: one path and one cache for every serving record.

A benchmark (:class:`ServingBench`) is a load (a closed loop of C clients, an open loop at a rate, or every
request at once), a length range, a size (requests measured after a warm-up) and the engine's settings. The
published closed-loop sweeps (``vllm bench serve --max-concurrency C --num-prompts 10*C --random-range-ratio
0.8``, or aiconfigurator's own client) report means over all 10 x C requests, the ramp-up (C prefills arriving
together) included. With fixed lengths the clients stay synchronised in waves (C requests finish in the same
step and the next C arrive together), so TTFT is about the prefill time of the whole wave; ranged lengths
spread the completions and TTFT drops towards one prefill.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from infercast.cost.front_end import with_front_end
from infercast.cost.profile import CostProfile
from infercast.records.record import Record
from infercast.sim.api import run
from infercast.sim.config import EngineConfig, SimulationConfig
from infercast.sim.speculative import SpeculativeConfig, mtp_draft_cost
from infercast.sim.workload import WorkloadSpec, length_range
from infercast.sim.workload.spec import PROMPTS_PER_CLIENT
from infercast.specs.deployment import Deployment

SEED = 0
"""One fixed seed for the sampled lengths and arrivals: predictions are deterministic (the spread between seeds
at 10 x C requests is ~1 % of mean TTFT; benchmarks/accuracy.py reports it)."""


@dataclass(frozen=True)
class ServingBench:
    """One serving benchmark: load, lengths, size and the engine's settings (None: the preset's).

    ``concurrency`` > 0: closed loop; else ``request_rate`` > 0: open loop (``arrival``, ``burstiness``); else
    offline. ``input_len`` / ``output_len``: the top L of lengths uniform in [``range_ratio`` x L, L].
    ``num_prompts``: requests measured (0: 10 x ``concurrency``); ``warmup`` more are sent first and left out.
    """

    input_len: int
    output_len: int
    concurrency: int = 0
    request_rate: float = 0.0
    arrival: str = ""
    burstiness: float = 1.0
    range_ratio: float = 1.0
    num_prompts: int = 0
    warmup: int = 0
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    gpu_memory_utilization: float | None = None
    scheduler: str | None = None
    overlap_scheduler: bool | None = None
    recv_interval: int | None = None
    batch_wait_iters: int | None = None
    batch_wait_ratio: float | None = None
    adp_balance_iters: int | None = None
    spec_tokens: int = 0
    spec_acceptance: float = 0.0

    @property
    def measured(self) -> int:
        """Requests the statistics cover."""
        return self.num_prompts or PROMPTS_PER_CLIENT * self.concurrency

    def workload(self, seed: int = SEED) -> WorkloadSpec:
        """The simulator's workload of this benchmark (warm-up requests first)."""
        ranged = self.range_ratio < 1
        load: dict[str, object]
        if self.concurrency:
            load = {"concurrency": self.concurrency}
        elif self.request_rate:
            load = {"rate": self.request_rate, "arrival": self.arrival or "poisson", "burstiness": self.burstiness}
        else:
            load = {"offline": True}
        return WorkloadSpec(
            input_len=length_range(self.input_len, self.range_ratio) if ranged else self.input_len,
            output_len=length_range(max(self.output_len, 2), self.range_ratio) if ranged else max(self.output_len, 2),
            num_requests=self.measured + self.warmup,
            seed=seed,
            **load,  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class BenchStatistics:
    """Statistics over the measured requests of one simulated benchmark (seconds; tokens/s)."""

    ttft_mean_s: float
    ttft_median_s: float
    tpot_mean_s: float
    tpot_median_s: float
    output_tok_s: float
    saturated: bool
    """The KV cache or the sequence limit held requests back (queueing beyond the clients' own wait)."""
    cliff: str | None = None
    """The cause of the run's cliff warning, ``"kv"`` or ``"slots"`` (:func:`infercast.sim.cliff.find_cliff`: TTFT
    mostly queueing for KV blocks or batch slots), as ``simulate`` would print it for this benchmark; None: none."""
    burst_rest_ttft_s: float | None = None
    """Where the mean TTFT is mostly the closed loop's opening burst (:func:`infercast.sim.burst.opening_burst`), as
    ``simulate`` would note for this benchmark, the mean TTFT of the requests after it; None: no such note (never
    where a warm-up is left out of the means)."""

    def value(self, kind: str, statistic: str) -> float:
        """The figure a serving record of ``kind`` reports with ``statistic`` (mean / median)."""
        if kind == "serving_throughput":
            return self.output_tok_s
        metric = "ttft" if kind == "serving_ttft" else "tpot"
        return getattr(self, f"{metric}_{statistic}_s")


def serving_bench(rec: Record) -> ServingBench:
    """The benchmark a serving record describes."""
    return ServingBench(
        rec.input_len,
        rec.output_len,
        concurrency=rec.concurrency,
        request_rate=rec.request_rate,
        arrival=rec.arrival,
        burstiness=rec.burstiness,
        range_ratio=rec.min_len_ratio or 1.0,
        num_prompts=rec.num_prompts,
        warmup=rec.warmup,
        max_num_batched_tokens=rec.max_num_batched_tokens or None,
        max_num_seqs=rec.max_num_seqs or None,
        gpu_memory_utilization=rec.gpu_memory_utilization or None,
        scheduler=rec.scheduler or None,
        recv_interval=rec.scheduler_recv_interval or None,
        batch_wait_iters=rec.batch_wait_iters or None,
        batch_wait_ratio=rec.batch_wait_ratio or None,
        adp_balance_iters=rec.adp_balance_iters or None,
        spec_tokens=rec.spec_tokens,
        spec_acceptance=rec.spec_acceptance,
    )


def simulate_serving(dep: Deployment, profile: CostProfile, bench: ServingBench, seed: int = SEED) -> BenchStatistics:
    """Simulate one serving benchmark on ``dep`` (cached per deployment, profile values, benchmark and seed: the
    TTFT, TPOT and throughput records of one run share it, and repeated fits re-use unchanged points)."""
    key = (dep.label, dep.engine.id, dep.model.num_layers, tuple(sorted(profile.flat().items())), bench, seed)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    if len(_CACHE) > CACHE_SIZE:
        _CACHE.clear()
    engine = EngineConfig(
        bench.scheduler,
        bench.max_num_seqs,
        bench.max_num_batched_tokens,
        None,
        bench.gpu_memory_utilization,
        overlap_scheduler=bench.overlap_scheduler,
        recv_interval=bench.recv_interval,
        batch_wait_iters=bench.batch_wait_iters,
        batch_wait_ratio=bench.batch_wait_ratio,
        adp_balance_iters=bench.adp_balance_iters,
        speculative=_mtp(bench, dep),
    )
    config = SimulationConfig(dep, bench.workload(seed), engine, profile=with_front_end(profile, dep, None))
    res = run(config)
    queued = res["queue_s"]["mean"] > 1e-3 or res["preemptions"] > 0
    if bench.warmup:
        kept = res.requests().sort_values("arrival_s").iloc[bench.warmup :]
        ttft = (float(kept.ttft_s.mean()), float(kept.ttft_s.median()))
        tpot = (float(kept.tpot_s.mean()), float(kept.tpot_s.median()))
    else:
        ttft = (res["ttft_s"]["mean"], res["ttft_s"]["p50"])
        tpot = (res["tpot_s"]["mean"], res["tpot_s"]["p50"])
    out = _CACHE[key] = BenchStatistics(
        *ttft,
        *tpot,
        res["output_throughput_tok_s"],
        bool(queued),
        res.cliff["cause"] if res.cliff else None,
        res.burst["rest_ttft_mean_s"] if res.burst and not bench.warmup else None,
    )
    return out


def _mtp(bench: ServingBench, dep: Deployment) -> SpeculativeConfig | None:
    """The run's multi-token-prediction drafting, if it had any (each draft runs the model's one MTP module)."""
    if not bench.spec_tokens:
        return None
    return SpeculativeConfig(bench.spec_tokens, bench.spec_acceptance, draft_cost=mtp_draft_cost(dep.model.num_layers))


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
        if r.closed_loop and r.kind != "serving_throughput" and r.stat == "mean":
            key = (r.engine, r.model, r.gpu, r.precision, r.tp, r.concurrency, r.input_len, r.output_len)
            points.setdefault(key, {})[r.kind] = r.value_si
    out: dict[str, dict[str, float]] = {}
    for key, m in sorted(points.items()):
        if len(m) < 2:
            continue
        engine, *_, clients, _, output_len = key
        _, requests, tokens = closed_loop_rates(clients, m["serving_ttft"], m["serving_tpot"], output_len)
        top = out.setdefault(engine, {"requests_per_s": 0.0, "output_tokens_per_s": 0.0})
        top["requests_per_s"] = max(top["requests_per_s"], round(requests, 2))
        top["output_tokens_per_s"] = max(top["output_tokens_per_s"], round(tokens, 1))
    return out


def served_concurrency(records: Iterable[Record]) -> dict[str, list[int]]:
    """Per engine, the fewest and the most concurrent clients among the closed-loop points of ``records``."""
    out: dict[str, list[int]] = {}
    for r in records:
        if r.closed_loop:
            lo, hi = out.setdefault(r.engine, [r.concurrency, r.concurrency])
            out[r.engine] = [min(lo, r.concurrency), max(hi, r.concurrency)]
    return dict(sorted(out.items()))


CACHE_SIZE = 20_000
_CACHE: dict[tuple, BenchStatistics] = {}
