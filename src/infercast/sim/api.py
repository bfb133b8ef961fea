"""``simulate``: replay traffic against a serving configuration and report ``vllm bench serve`` metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.cost.profile import CostProfile
from infercast.errors import InfercastError, require_positive_int, require_positive_number
from infercast.sim.cluster import Coordinator, KVLink, Router
from infercast.sim.metrics import SLO, latency_stats, request_metrics
from infercast.sim.recorder import Recorder
from infercast.sim.replica import Replica, ReplicaConfig
from infercast.sim.saturation import saturation
from infercast.sim.scheduler import SCHEDULERS, engine_scheduler, scheduler_name
from infercast.sim.speculative import SpeculativeConfig
from infercast.sim.state import RequestTable
from infercast.sim.workload import WORKLOAD_FIELDS, LengthLike, PrefixSpec, Workload, WorkloadSpec
from infercast.specs.deployment import Deployment
from infercast.specs.engine import get_engine
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec

SIMULATE_SCHEDULERS = (*SCHEDULERS, "disagg")


@dataclass(frozen=True)
class DisaggConfig:
    """Disaggregated serving: separate prefill and decode pools (instance counts and TP of each)."""

    prefill_instances: int = 1
    decode_instances: int = 1
    prefill_tp: int | None = None
    decode_tp: int | None = None
    link: KVLink = field(default_factory=KVLink)

    def __post_init__(self) -> None:
        for name in ("prefill_instances", "decode_instances"):
            object.__setattr__(self, name, require_positive_int(name, getattr(self, name)))
        for name in ("prefill_tp", "decode_tp"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, require_positive_int(name, value))
        if not isinstance(self.link, KVLink):
            raise InfercastError(f"must be a KVLink, got {type(self.link).__name__}", field="link")


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
        """One row per request: arrival, lengths, TTFT, TPOT, E2E, queueing (:meth:`RequestTable.queue_delay`),
        first schedule, cache hits, preemptions."""
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
                "queue_s": tb.queue_delay(),
                "scheduled_s": tb.scheduled,
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


def build_workload(**options: Any) -> Workload:
    """The workload a ``simulate`` call describes: :class:`~infercast.sim.workload.WorkloadSpec` keywords."""
    return WorkloadSpec(**options).build()


def simulate(
    model: str | ModelSpec,
    gpu: str | HardwareSpec,
    *,
    tp: int = 1,
    ep: int = 1,
    precision: str | None = None,
    kv_precision: str | None = None,
    engine: str = "vllm",
    scheduler: str | None = None,
    workload: Workload | None = None,
    trace: str | Path | None = None,
    input_len: LengthLike | None = None,
    output_len: LengthLike | None = None,
    num_requests: int | None = None,
    rate: float | None = None,
    burstiness: float = 1.0,
    concurrency: int | None = None,
    offline: bool = False,
    arrival: str | None = None,
    seed: int = 0,
    prefix: PrefixSpec | None = None,
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

    The requests: the keywords of :class:`~infercast.sim.workload.WorkloadSpec` (``workload`` / ``trace`` /
    ``input_len`` + ``output_len``, ``num_requests``, ``rate`` / ``concurrency`` / ``offline``, ``arrival``,
    ``burstiness``, ``prefix``, ``seed``); options that would be ignored or conflict are errors.
    ``scheduler``: static | prefill-first (continuous batching, whole prompts first) | chunked (chunked
    prefill) | disagg (separate prefill and decode pools, sized by ``disagg``; both run chunked prefill);
    None: the engine preset's (chunked where the engine enables chunked prefill, else prefill-first).
    ``skip=False`` steps token by token (same results; used to test the fast path).
    """
    args = locals()
    spec = WorkloadSpec(**{name: args[name] for name in WORKLOAD_FIELDS})
    if scheduler is None:
        scheduler = engine_scheduler(get_engine(engine))
    sched = scheduler_name(scheduler, extra=("disagg",))
    replicas = require_positive_int("replicas", replicas)
    if disagg is not None and sched != "disagg":
        raise InfercastError(f"a DisaggConfig needs scheduler='disagg' (got {sched!r})", field="disagg")
    if sched == "disagg":
        disagg = DisaggConfig() if disagg is None else disagg
        if not isinstance(disagg, DisaggConfig):
            raise InfercastError(f"must be a DisaggConfig, got {type(disagg).__name__}", field="disagg")
        if replicas != 1:
            raise InfercastError(
                "with scheduler='disagg' the pools are sized by DisaggConfig(prefill_instances, decode_instances) "
                "(--prefill-instances, --decode-instances)",
                field="replicas",
            )
    trace_steps = require_positive_int("trace_steps", trace_steps, minimum=0)
    sample_interval = require_positive_number("sample_interval", sample_interval, allow_zero=True)
    slo = SLO.parse(goodput)
    work = spec.build()
    table = RequestTable(work)
    _check_lengths(work, model)
    recorder = Recorder(trace_limit=trace_steps, sample_interval=sample_interval)

    def make(rid: int, tp_: int, sched_: str) -> Replica:
        dep = Deployment.resolve(model, gpu, tp=tp_, ep=ep, precision=precision, kv_precision=kv_precision,
                                 engine=engine)  # fmt: skip
        cfg = ReplicaConfig(dep, sched_, max_num_seqs, max_num_batched_tokens, block_size, gpu_memory_utilization,
                            prefix_caching, preemption, profile, speculative, spec.seed)  # fmt: skip
        return Replica(rid, cfg, table, recorder, skip=skip)

    pools: dict[str, Any] = {}
    if disagg is not None:
        pre = [make(r, disagg.prefill_tp or tp, "chunked") for r in range(disagg.prefill_instances)]
        dec = [make(disagg.prefill_instances + r, disagg.decode_tp or tp, "chunked")
               for r in range(disagg.decode_instances)]  # fmt: skip
        coord = Coordinator(table, pre, Router(router, table), decode_replicas=dec,
                            decode_router=Router("least_outstanding", table), kv_link=disagg.link,
                            closed_loop=work.closed_loop)  # fmt: skip
        reps = pre + dec
        pools = {"prefill_instances": len(pre), "decode_instances": len(dec), "prefill_tp": pre[0].config.deployment.tp,
                 "decode_tp": dec[0].config.deployment.tp}  # fmt: skip
    else:
        reps = [make(r, tp, sched) for r in range(replicas)]
        coord = Coordinator(table, reps, Router(router, table), closed_loop=work.closed_loop)
    coord.run()
    table.freeze()
    dep0 = reps[0].config.deployment
    config = {
        "model": dep0.model.id, "gpu": dep0.hardware.id, "tp": tp, "ep": ep, "precision": dep0.scheme.name,
        "engine": engine, "scheduler": sched, "replicas": len(reps), **pools, "router": router,
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
    """The metrics ``vllm bench serve`` reports, plus queueing, cache, preemption and saturation figures.

    Throughputs are over the benchmark duration as ``vllm bench serve`` measures it: from the benchmark's
    start — the workload's t = 0, when the client starts sending — to the last completion.
    """
    done = ~np.isnan(table.finish)
    ttft, tpot, e2e = request_metrics(table.arrival, table.first_token, table.finish, table.output)
    span = max(float(np.nanmax(table.finish)) if done.any() else 0.0, 1e-12)
    completed = int(done.sum())
    out_tokens = int(table.output[done].sum())
    in_tokens = int(table.prompt[done].sum())
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
        "queue_s": latency_stats(table.queue_delay()[done]),
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


__all__ = ["DisaggConfig", "SimulationResult", "build_workload", "saturation", "simulate", "summarize"]
