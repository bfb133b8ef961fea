"""``simulate``: replay traffic against a serving configuration and report ``vllm bench serve`` metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.cost.profile import CostProfile
from infercast.errors import InfercastError, require_positive_int
from infercast.sim.cluster import Coordinator, KVLink, Router
from infercast.sim.metrics import SLO, latency_stats, request_metrics
from infercast.sim.recorder import Recorder
from infercast.sim.replica import Replica, ReplicaConfig
from infercast.sim.speculative import SpeculativeConfig
from infercast.sim.state import RequestTable
from infercast.sim.workload import BUILTIN_TRACES, Workload, builtin_trace, load_trace, synthetic
from infercast.specs.deployment import Deployment
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec


@dataclass(frozen=True)
class DisaggConfig:
    """Disaggregated serving: separate prefill and decode pools (instance counts and TP of each)."""

    prefill_instances: int = 1
    decode_instances: int = 1
    prefill_tp: int | None = None
    decode_tp: int | None = None
    link: KVLink = field(default_factory=KVLink)


@dataclass
class SimulationResult:
    """Outcome of a run: summary metrics (``summary``), per-request table, occupancy, step trace."""

    summary: dict[str, Any]
    table: RequestTable
    recorder: Recorder
    config: dict[str, Any]
    replicas: list[Replica] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary, "config": self.config}

    def requests(self) -> pd.DataFrame:
        """One row per request: arrival, lengths, TTFT, TPOT, E2E, queueing, cache hits, preemptions."""
        tb = self.table
        ttft, tpot, e2e = request_metrics(tb.arrival, tb.first_token, tb.finish, tb.output)
        return pd.DataFrame(
            {
                "arrival_s": tb.arrival,
                "prompt_tokens": tb.prompt,
                "output_tokens": tb.output,
                "ttft_s": ttft,
                "tpot_s": tpot,
                "e2e_s": e2e,
                "queue_s": tb.scheduled - tb.visible,
                "first_token_s": tb.first_token,
                "finish_s": tb.finish,
                "cached_tokens": tb.cached_tokens,
                "preemptions": tb.preemptions,
                "replica": tb.replica,
            }
        )

    def occupancy(self) -> pd.DataFrame:
        """KV blocks in use and batch occupancy over time, per replica (sampled)."""
        return pd.DataFrame(self.recorder.occupancy())

    def __getitem__(self, key: str) -> Any:
        return self.summary[key]


def build_workload(
    *,
    workload: Workload | None = None,
    trace: str | None = None,
    input_len: int | str | None = None,
    output_len: int | str | None = None,
    num_requests: int | None = None,
    rate: float | None = None,
    burstiness: float = 1.0,
    concurrency: int | None = None,
    offline: bool = False,
    arrival: str | None = None,
    seed: int = 0,
    prefix: Any = None,
) -> Workload:
    """The workload a ``simulate`` call describes (exactly one source of requests, one arrival process)."""
    sources = sum(x is not None for x in (workload, trace)) + (input_len is not None or output_len is not None)
    if sources != 1:
        raise InfercastError("give exactly one of: a workload, --trace FILE, or --input-len and --output-len",
                             field="workload")  # fmt: skip
    modes = sum([rate is not None, concurrency is not None, offline])
    if workload is not None:
        return workload
    if trace is not None:
        work = builtin_trace(trace) if trace in BUILTIN_TRACES and not Path(trace).exists() else load_trace(trace)
        if num_requests:
            work = work.head(require_positive_int("num_requests", num_requests))
        if concurrency is not None or offline:
            work = synthetic(len(work), work.prompt_len, work.output_len, arrival="offline" if offline else "poisson",
                             rate=None, concurrency=concurrency, seed=seed)  # fmt: skip
        elif rate is not None:
            work = synthetic(len(work), work.prompt_len, work.output_len, arrival=arrival or "gamma", rate=rate,
                             burstiness=burstiness, seed=seed)  # fmt: skip
        return work
    if input_len is None or output_len is None:
        raise InfercastError("both --input-len and --output-len are needed", field="input_len")
    if modes != 1:
        raise InfercastError("choose exactly one of --rate R, --concurrency C, --offline", field="rate")
    n = require_positive_int("num_requests", num_requests if num_requests is not None else 1000)
    if offline:
        return synthetic(n, input_len, output_len, arrival="offline", seed=seed, prefix=prefix)
    if concurrency is not None:
        return synthetic(n, input_len, output_len, concurrency=concurrency, seed=seed, prefix=prefix)
    kind = arrival or ("gamma" if burstiness != 1.0 else "poisson")
    return synthetic(n, input_len, output_len, arrival=kind, rate=rate, burstiness=burstiness, seed=seed,
                     prefix=prefix)  # fmt: skip


def simulate(
    model: str | ModelSpec,
    gpu: str | HardwareSpec,
    *,
    tp: int = 1,
    ep: int = 1,
    precision: str | None = None,
    kv_precision: str | None = None,
    engine: str = "vllm",
    scheduler: str = "sarathi",
    workload: Workload | None = None,
    trace: str | None = None,
    input_len: int | str | None = None,
    output_len: int | str | None = None,
    num_requests: int | None = None,
    rate: float | None = None,
    burstiness: float = 1.0,
    concurrency: int | None = None,
    offline: bool = False,
    arrival: str | None = None,
    seed: int = 0,
    prefix: Any = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    block_size: int | None = None,
    gpu_memory_utilization: float | None = None,
    prefix_caching: bool = True,
    preemption: str = "recompute",
    replicas: int = 1,
    router: str = "round_robin",
    disagg: DisaggConfig | None = None,
    goodput: list[str] | str | None = None,
    speculative: SpeculativeConfig | None = None,
    skip: bool = True,
    trace_steps: int = 0,
    sample_interval: float = 1.0,
    profile: CostProfile | None = None,
) -> SimulationResult:
    """Simulate serving ``model`` on ``gpu`` under a workload; see ``infercast simulate --help``.

    ``scheduler``: static | vllm (prefill-first continuous batching) | sarathi (chunked prefill) | disagg.
    ``skip=False`` steps token by token (same results; used to test the fast path).
    """
    work = build_workload(workload=workload, trace=trace, input_len=input_len, output_len=output_len,
                          num_requests=num_requests, rate=rate, burstiness=burstiness, concurrency=concurrency,
                          offline=offline, arrival=arrival, seed=seed, prefix=prefix)  # fmt: skip
    slo = SLO.parse(goodput)
    replicas = require_positive_int("replicas", replicas)
    if scheduler == "disagg" and disagg is None:
        disagg = DisaggConfig()
    table = RequestTable(work)
    _check_lengths(work, model)
    recorder = Recorder(trace_limit=trace_steps, sample_interval=sample_interval)

    def make(rid: int, tp_: int, sched: str) -> Replica:
        dep = Deployment.resolve(model, gpu, tp=tp_, ep=ep, precision=precision, kv_precision=kv_precision,
                                 engine=engine)  # fmt: skip
        cfg = ReplicaConfig(dep, sched, max_num_seqs, max_num_batched_tokens, block_size, gpu_memory_utilization,
                            prefix_caching, preemption, profile, speculative, seed)  # fmt: skip
        return Replica(rid, cfg, table, recorder, skip=skip)

    if disagg is not None:
        pre = [make(r, disagg.prefill_tp or tp, "sarathi") for r in range(disagg.prefill_instances)]
        dec = [make(disagg.prefill_instances + r, disagg.decode_tp or tp, "sarathi")
               for r in range(disagg.decode_instances)]  # fmt: skip
        coord = Coordinator(table, pre, Router(router, table), decode_replicas=dec,
                            decode_router=Router("least_outstanding", table), kv_link=disagg.link,
                            closed_loop=work.closed_loop)  # fmt: skip
        reps = pre + dec
    else:
        reps = [make(r, tp, scheduler) for r in range(replicas)]
        coord = Coordinator(table, reps, Router(router, table), closed_loop=work.closed_loop)
    coord.run()
    table.freeze()
    dep0 = reps[0].config.deployment
    config = {
        "model": dep0.model.id, "gpu": dep0.hardware.id, "tp": tp, "ep": ep, "precision": dep0.scheme.name,
        "engine": engine, "scheduler": scheduler, "replicas": len(reps), "router": router,
        "max_num_seqs": reps[0].max_seqs, "max_num_batched_tokens": reps[0].max_batched_tokens,
        "kv_blocks_per_replica": reps[0].kv.num_blocks, "block_size": reps[0].bs, "workload": work.name,
    }  # fmt: skip
    return SimulationResult(summarize(table, recorder, reps, slo, work), table, recorder, config, reps)


def _check_lengths(work: Workload, model: str | ModelSpec) -> None:
    from infercast.specs.catalog import get_model

    spec = get_model(model)
    total = work.prompt_len + work.output_len
    longest = int(total.max())
    if longest > spec.max_context:
        i = int(np.argmax(total))
        raise InfercastError(
            f"request {i} needs {longest} tokens (prompt + output) but {spec.id} supports {spec.max_context}",
            field="workload",
        )


def summarize(table: RequestTable, rec: Recorder, reps: list[Replica], slo: SLO | None, work: Workload) -> dict:
    """The metrics ``vllm bench serve`` reports, plus queueing, cache, preemption and saturation figures."""
    done = ~np.isnan(table.finish)
    ttft, tpot, e2e = request_metrics(table.arrival, table.first_token, table.finish, table.output)
    duration = float(np.nanmax(table.finish)) if done.any() else 0.0
    start = float(table.arrival.min()) if table.n else 0.0
    span = max(duration - min(start, 0.0), 1e-12)
    completed = int(done.sum())
    out_tokens = int(table.output[done].sum())
    in_tokens = int(table.prompt[done].sum())
    queue = table.scheduled - table.visible  # waiting inside the engine (after the request overhead)
    summary: dict[str, Any] = {
        "num_requests": table.n,
        "completed": completed,
        "duration_s": span,
        "request_throughput_req_s": completed / span,
        "output_throughput_tok_s": out_tokens / span,
        "total_throughput_tok_s": (in_tokens + out_tokens) / span,
        "ttft_s": latency_stats(ttft[done]),
        "tpot_s": latency_stats(tpot[done]),
        "itl_s": rec.gaps.stats(),
        "e2e_s": latency_stats(e2e[done]),
        "queue_s": latency_stats(queue[done]),
        "preemptions": int(table.preemptions.sum()),
        "prefix_cache_hit_rate": _hit_rate(reps),
        "steps": rec.step_count,
        "busy_fraction": rec.busy_time / (span * len(reps)),
        "mean_decode_batch": _mean_batch(rec),
    }
    if slo is not None:
        ok = slo.met(ttft[done], tpot[done], e2e[done])
        summary["goodput_req_s"] = int(ok.sum()) / span
        summary["slo_attainment"] = float(ok.mean()) if ok.size else 0.0
        summary["slo"] = slo.to_dict()
    else:
        summary["goodput_req_s"] = summary["request_throughput_req_s"]
    summary.update(saturation(table, work))
    return summary


def _hit_rate(reps: list[Replica]) -> float:
    looked = sum(r.kv.lookup_tokens for r in reps)
    return sum(r.kv.hits_tokens for r in reps) / looked if looked else 0.0


def _mean_batch(rec: Recorder) -> float:
    if not rec.samples:
        return 0.0
    occ = rec.occupancy()
    return float(occ["running"].mean())


def saturation(table: RequestTable, work: Workload) -> dict[str, Any]:
    """Does the configuration keep up with the offered load?

    Over the arrival window (after the first quarter, to skip the warm-up), a stable system completes requests
    as fast as they arrive; a saturated one falls behind and its queueing delay keeps growing.
    """
    if work.closed_loop or table.n < 50:
        return {"saturated": False}
    order = np.argsort(table.arrival)
    arrive = table.arrival[order]
    span = float(arrive[-1] - arrive[0])
    if span <= 0:
        return {"saturated": False, "offered_rate_req_s": float("inf")}
    quarter = len(arrive) // 4
    start, stop = float(arrive[quarter]), float(arrive[-1])
    window = max(stop - start, 1e-12)
    # completions trail arrivals by about one request's latency: compare against the window shifted by that
    lag = float(np.nanmedian((table.finish - table.arrival)[order[:quarter]])) if quarter else 0.0
    # ... and never into the drain after the last arrival, when a backlog empties at full speed
    lag = min(lag, 0.5 * window)
    arrived = int(np.count_nonzero((arrive >= start) & (arrive <= stop - lag)))
    served = int(np.count_nonzero((table.finish >= start + lag) & (table.finish <= stop)))
    keep_up = served / arrived if arrived else 1.0
    queue = (table.scheduled - table.arrival)[order]
    tenth = max(len(queue) // 10, 1)
    early, late = float(np.nanmean(queue[:tenth])), float(np.nanmean(queue[-tenth:]))
    offered = (table.n - 1) / span
    saturated = keep_up < 0.9 or ((late - early) / span > 0.05 and late > 1.0)
    out: dict[str, Any] = {"saturated": bool(saturated), "offered_rate_req_s": offered,
                           "served_to_arrived": keep_up, "served_rate_req_s": served / window}  # fmt: skip
    if saturated:
        out["saturation_reason"] = (
            f"served {keep_up:.0%} of the requests that arrived over the run and queueing delay grew from "
            f"{early:.2f} s to {late:.2f} s: the offered {offered:.2f} req/s exceeds what this configuration serves"
        )
    return out
