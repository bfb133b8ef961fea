"""``simulate``: replay traffic against a serving configuration and report ``vllm bench serve`` metrics."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from infercast.analysis.error_bands import Confidence, cliff_band, deployment_confidence
from infercast.cost.front_end import with_front_end
from infercast.cost.profile import CostProfile
from infercast.errors import InfercastError, nearest
from infercast.sim.burst import opening_burst
from infercast.sim.cliff import find_cliff
from infercast.sim.cluster import Coordinator, Router
from infercast.sim.config import (
    ClusterConfig,
    DisaggConfig,
    EngineConfig,
    KVLink,
    ObserveConfig,
    SimulationConfig,
    split_scheduler,
)
from infercast.sim.fit_check import refuse_unservable
from infercast.sim.metrics import SLO, latency_stats, request_metrics
from infercast.sim.recorder import Recorder
from infercast.sim.replica import Replica
from infercast.sim.saturation import saturation
from infercast.sim.state import RequestTable
from infercast.sim.summary import LatencyStats, SimulationSummary
from infercast.sim.workload import WORKLOAD_FIELDS, Workload, WorkloadSpec
from infercast.specs.deployment import Deployment, check_tp_on_hardware
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec


@dataclass
class SimulationResult:
    """Outcome of a run: typed summary metrics (``summary``), per-request table, occupancy, step trace.

    ``config`` is the flat description of the run written to JSON output and plot captions; ``settings`` the
    :class:`SimulationConfig` that produced it."""

    summary: SimulationSummary
    table: RequestTable
    recorder: Recorder
    config: dict[str, Any]
    replicas: list[Replica] = field(default_factory=list, repr=False)
    settings: SimulationConfig | None = field(default=None, repr=False)
    confidence: Confidence | None = None
    """Expected error of the mean TTFT / TPOT in this regime, and warnings (:mod:`infercast.analysis.error_bands`)."""
    cliff: dict[str, Any] | None = None
    """TTFT dominated by queueing for KV blocks or batch slots: cause and remedy (:func:`.cliff.find_cliff`)."""
    burst: dict[str, Any] | None = None
    """A closed loop's mean TTFT that is mostly its opening burst, and the TTFT after it
    (:func:`.burst.opening_burst`)."""

    def to_dict(self) -> dict[str, Any]:
        extra = self.confidence.to_dict() if self.confidence else {}
        return {**self.summary.to_dict(), **extra, "cliff": self.cliff, "burst": self.burst, "config": self.config}

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


def simulate(
    model: SimulationConfig | str | ModelSpec,
    gpu: str | HardwareSpec | None = None,
    **options: Any,
) -> SimulationResult:
    """Simulate serving under a workload: ``simulate(config)`` with a :class:`SimulationConfig`, or
    ``simulate(model, gpu, **options)`` with the keywords of :func:`config_from_keywords`."""
    if isinstance(model, SimulationConfig):
        if gpu is not None or options:
            raise InfercastError("give a SimulationConfig alone, or a model and gpu with keywords", field="config")
        return run(model)
    if gpu is None:
        raise InfercastError("needs a gpu (or a SimulationConfig)", field="gpu")
    return run(config_from_keywords(model, gpu, **options))


def simulation_config(
    deployment: Deployment,
    workload: WorkloadSpec | Workload,
    engine: EngineConfig | None = None,
    cluster: ClusterConfig | None = None,
    observe: ObserveConfig | None = None,
    *,
    profile: CostProfile | None = None,
    stream_token_s: float | None = None,
    step_mode: bool = False,
) -> SimulationConfig:
    """A :class:`SimulationConfig` from its parts, with the API server's front-end priced in the profile.

    ``stream_token_s``: seconds of the front-end per streamed token (0: none; None: the profile's, TensorRT-LLM's
    fitted one, none for the others; :mod:`infercast.cost.front_end`). Disaggregated pools (``cluster.disagg``)
    take tensor parallelism only: a deployment with ``pp`` or ``attention_dp`` is refused.
    """
    cluster = ClusterConfig() if cluster is None else cluster
    if cluster.disagg is not None and (deployment.pp > 1 or deployment.attention_dp > 1):
        raise InfercastError(
            "disaggregated pools are sized by tensor parallelism only; drop pp / attention_dp or the disagg scheduler",
            field="pp" if deployment.pp > 1 else "attention_dp",
        )
    return SimulationConfig(
        deployment,
        WorkloadSpec(workload=workload) if isinstance(workload, Workload) else workload,
        EngineConfig() if engine is None else engine,
        cluster,
        ObserveConfig() if observe is None else observe,
        with_front_end(profile, deployment, stream_token_s),
        step_mode,
    )


LAYOUT_KEYWORDS = ("tp", "ep", "pp", "attention_dp", "precision", "kv_precision", "engine")
"""Keywords of :meth:`Deployment.resolve` that :func:`config_from_keywords` takes."""
ENGINE_KEYWORDS = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "block_size",
    "gpu_memory_utilization",
    "prefix_caching",
    "preemption",
    "speculative",
    "overlap_scheduler",
    "recv_interval",
    "batch_wait_iters",
    "batch_wait_ratio",
    "adp_balance_iters",
)
"""Keywords of :class:`EngineConfig` (besides ``scheduler``) that :func:`config_from_keywords` takes."""
OBSERVE_KEYWORDS = ("goodput", "trace_steps", "sample_interval")
RUN_KEYWORDS = ("scheduler", "replicas", "router", "disagg", "profile", "stream_token_s", "step_mode")
SIMULATE_KEYWORDS = (*WORKLOAD_FIELDS, *LAYOUT_KEYWORDS, *ENGINE_KEYWORDS, *OBSERVE_KEYWORDS, *RUN_KEYWORDS)
"""Every keyword of ``simulate(model, gpu, ...)``."""


def config_from_keywords(model: str | ModelSpec, gpu: str | HardwareSpec, **options: Any) -> SimulationConfig:
    """A :class:`SimulationConfig` from flat keywords (the ``infercast simulate`` options by their API names): the
    one place where ``simulate(model, gpu, ...)``'s keywords become typed parts.

    * the requests: the fields of :class:`~infercast.sim.workload.WorkloadSpec` (``workload`` / ``trace`` /
      ``input_len`` + ``output_len``, ``num_requests``, ``rate`` / ``concurrency`` / ``offline``, ``arrival``,
      ``burstiness``, ``prefix``, ``seed``); options that would be ignored or conflict are errors;
    * the layout: ``tp``, ``ep``, ``pp``, ``attention_dp``, ``precision``, ``kv_precision``, ``engine``
      (:meth:`Deployment.resolve`): a replica spans ``pp`` pipeline stages of ``tp x attention_dp`` GPUs; its
      steps cost what the cost layer charges such a layout;
    * the engine: the fields of :class:`EngineConfig` (``max_num_seqs``, ..., ``overlap_scheduler``) and
      ``scheduler``: static | prefill-first (continuous batching, whole prompts first) | chunked (chunked
      prefill) | inflight (whole prompts beside the decodes, KV reserved for prompt + output: TensorRT-LLM) |
      disagg (separate prefill and decode pools, sized by ``disagg``; both run chunked prefill); None: the
      engine preset's ``scheduler``;
    * the cluster: ``replicas``, ``router``, ``disagg`` (:class:`ClusterConfig`); what is observed: ``goodput``,
      ``trace_steps``, ``sample_interval`` (:class:`ObserveConfig`);
    * ``profile``, ``stream_token_s``, ``step_mode`` (step token by token: same results, slow; used to check
      the fast path): see :func:`simulation_config`.

    An unknown keyword is an :class:`InfercastError` naming it.
    """
    for name in options:
        if name not in SIMULATE_KEYWORDS:
            close = nearest(name, SIMULATE_KEYWORDS)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise InfercastError(f"not an option of simulate{hint}", field=name, allowed=SIMULATE_KEYWORDS)

    def take(names: tuple[str, ...]) -> dict[str, Any]:
        return {k: options[k] for k in names if k in options}

    spec = WorkloadSpec(**take(WORKLOAD_FIELDS))
    sched, disagg = split_scheduler(options.get("scheduler"), options.get("disagg"))
    dep = Deployment.resolve(model, gpu, **take(LAYOUT_KEYWORDS))
    return simulation_config(
        dep,
        spec,
        EngineConfig(sched, **take(ENGINE_KEYWORDS)),
        ClusterConfig(**take(("replicas", "router")), disagg=disagg),
        ObserveConfig(**take(OBSERVE_KEYWORDS)),
        profile=options.get("profile"),
        stream_token_s=options.get("stream_token_s"),
        step_mode=options.get("step_mode", False),
    )


def run(config: SimulationConfig) -> SimulationResult:
    """Run one simulation (see :class:`SimulationConfig`)."""
    work = config.workload.build()
    _check_lengths(work, config.deployment.model)
    table = RequestTable(work, config.workload.seed)
    recorder = Recorder(trace_limit=config.observe.trace_steps, sample_interval=config.observe.sample_interval)
    coord, reps, pools = _cluster(config, work, table, recorder)
    coord.run()
    table.freeze()
    description = _describe(config, reps, pools, work)
    summary = summarize(table, recorder, reps, config.observe.goodput, work, pools.get("prefill_instances", 0))
    conf = _confidence(config.deployment, summary, reps, pools, work)
    result = SimulationResult(summary, table, recorder, description, reps, config, conf)
    return _with_burst(_on_cliff(result, work, config.cluster.disagg), work)


def _cluster(
    config: SimulationConfig, work: Workload, table: RequestTable, recorder: Recorder
) -> tuple[Coordinator, list[Replica], dict[str, Any]]:
    """The replicas and the coordinator that routes to them; for disaggregated pools, their sizes."""
    dep, engine, cluster = config.deployment, config.engine, config.cluster

    def make(rid: int, tp: int | None, engine: EngineConfig) -> Replica:
        return Replica(
            rid,
            with_tp(dep, tp),
            engine,
            table,
            recorder,
            profile=config.profile,
            seed=config.workload.seed,
            step_mode=config.step_mode,
        )

    disagg = cluster.disagg
    if disagg is None:
        reps = [make(r, None, engine) for r in range(cluster.replicas)]
        refuse_unservable(table, reps)
        return Coordinator(table, reps, Router(cluster.router, table), closed_loop=work.closed_loop), reps, {}
    pool = replace(engine, scheduler="chunked")  # both pools run chunked prefill
    pre = [make(r, disagg.prefill_tp, pool) for r in range(disagg.prefill_instances)]
    dec = [make(disagg.prefill_instances + r, disagg.decode_tp, pool) for r in range(disagg.decode_instances)]
    coord = Coordinator(
        table,
        pre,
        Router(cluster.router, table),
        decode_replicas=dec,
        decode_router=Router("least_outstanding", table),
        kv_link=disagg.link,
        closed_loop=work.closed_loop,
    )
    refuse_unservable(table, pre, decode=False)
    refuse_unservable(table, dec)
    pools = {
        "prefill_instances": len(pre),
        "decode_instances": len(dec),
        "prefill_tp": pre[0].deployment.tp,
        "decode_tp": dec[0].deployment.tp,
    }
    return coord, pre + dec, pools


def _describe(config: SimulationConfig, reps: list[Replica], pools: dict[str, Any], work: Workload) -> dict[str, Any]:
    """The flat description of the run (JSON output, plot captions)."""
    dep, dep0 = config.deployment, reps[0].deployment
    return {
        "model": dep0.model.id,
        "gpu": dep0.hardware.id,
        "tp": dep.tp,
        "ep": dep.ep,
        "pp": dep.pp,
        "attention_dp": dep.attention_dp,
        "gpus_per_replica": dep.gpus,
        "precision": dep0.scheme.name,
        "engine": dep.engine.id,
        "scheduler": config.scheduler,
        "replicas": len(reps),
        **pools,
        "router": config.cluster.router,
        "max_num_seqs": reps[0].max_seqs,
        "max_num_batched_tokens": reps[0].max_batched_tokens,
        "kv_blocks_per_replica": reps[0].kv.num_blocks,
        "block_size": reps[0].bs,
        "workload": work.name,
    }


def _confidence(
    dep: Deployment, summary: SimulationSummary, reps: list[Replica], pools: dict[str, Any], work: Workload
) -> Confidence:
    """Expected error of the run's means in its regime (:func:`deployment_confidence`)."""
    # load level: the closed loop's clients, else the mean number of running sequences; near saturation when
    # the KV cache ran out (preemptions) or an open-loop run fell behind its arrivals
    load = work.closed_loop or max(1, round(summary["mean_decode_batch"]))
    queued = summary["preemptions"] > 0 or summary["saturated"]
    # per server: prompts go to the prefill pool, output tokens come from the decode pool when disaggregated
    rates = {
        "requests_per_s": summary.request_throughput_req_s / pools.get("prefill_instances", len(reps)),
        "output_tokens_per_s": summary.output_throughput_tok_s / pools.get("decode_instances", len(reps)),
    }
    front_end = _front_end_load(reps, summary.duration_s)
    return deployment_confidence(dep, load, rates=rates, saturated=bool(queued), front_end=front_end)


def _on_cliff(result: SimulationResult, work: Workload, disagg: DisaggConfig | None) -> SimulationResult:
    """``result`` with its cliff (:func:`find_cliff`; colocated runs only), the warning first and the TTFT band
    that of runs on such a cliff (:func:`cliff_band`: the error measured on published sweeps whose simulation is
    on a cliff of the same cause): queueing-dominated TTFT swings with a few percent of KV pool or step time.
    Without that band (never written) the regime's band is widened to its p90."""
    cliff = None if disagg is not None else find_cliff(result.table, result.replicas[0], work.closed_loop)
    conf = result.confidence
    if cliff is None or conf is None:
        return replace(result, cliff=cliff)
    bands = dict(conf.bands)
    measured = cliff_band(cliff["cause"])
    if measured is not None:
        bands["ttft"] = measured
    elif (band := bands.get("ttft")) is not None:
        bands["ttft"] = replace(band, typical=band.p90, regime={**band.regime, "cliff": cliff["cause"]})
    return replace(result, cliff=cliff, confidence=Confidence(bands, [f"cliff: {cliff['message']}", *conf.warnings]))


def _with_burst(result: SimulationResult, work: Workload) -> SimulationResult:
    """``result`` with its opening burst (:func:`opening_burst`) and, when there is one, its note among the
    warnings: the mean TTFT then hangs on how many requests follow the burst."""
    burst = opening_burst(result.table, work.closed_loop)
    conf = result.confidence
    if burst is None:
        return result
    if conf is not None:
        conf = Confidence(conf.bands, [*conf.warnings, f"burst: {burst['message']}"])
    return replace(result, burst=burst, confidence=conf)


def with_tp(dep: Deployment, tp: int | None) -> Deployment:
    """The deployment with another tensor-parallel size (a disaggregated pool's), validated as
    :meth:`Deployment.resolve` validates it; ``None``: unchanged."""
    if tp is None or tp == dep.tp:
        return dep
    dep.model.check_parallelism(tp, dep.ep)
    check_tp_on_hardware(dep.hardware, tp)
    return replace(dep, tp=tp)


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


def summarize(
    table: RequestTable, rec: Recorder, reps: list[Replica], slo: SLO | None, work: Workload, prefill_replicas: int = 0
) -> SimulationSummary:
    """The metrics ``vllm bench serve`` reports, plus queueing, cache, preemption and saturation figures.

    Throughputs are over the benchmark duration as ``vllm bench serve`` measures it: from the benchmark's
    start — the workload's t = 0, when the client starts sending — to the last completion.
    ``prefill_replicas``: a disaggregated run's first replicas that form its prefill pool (0: not disaggregated).
    """
    done = ~np.isnan(table.finish)
    ttft, tpot, e2e = request_metrics(table.arrival, table.first_token, table.finish, table.output)
    span = max(float(np.nanmax(table.finish)) if done.any() else 0.0, 1e-12)
    completed = int(done.sum())
    out_tokens = int(table.output[done].sum())
    in_tokens = int(table.prompt[done].sum())
    goodput: dict[str, Any] = {"goodput_req_s": completed / span}
    front_end = _front_end_load(reps, span)
    if slo is not None:
        ok = slo.met(ttft[done], tpot[done], e2e[done])
        goodput = {
            "goodput_req_s": int(ok.sum()) / span,
            "slo_attainment": float(ok.mean()) if ok.size else 0.0,
            "slo": slo.to_dict(),
        }
    return SimulationSummary(
        num_requests=table.n,
        completed=completed,
        duration_s=span,
        request_throughput_req_s=completed / span,
        output_throughput_tok_s=out_tokens / span,
        total_throughput_tok_s=(in_tokens + out_tokens) / span,
        ttft_s=LatencyStats.from_dict(latency_stats(ttft[done])),
        tpot_s=LatencyStats.from_dict(latency_stats(tpot[done])),
        itl_s=LatencyStats.from_dict(rec.gaps.stats()),
        e2e_s=LatencyStats.from_dict(latency_stats(e2e[done])),
        queue_s=LatencyStats.from_dict(latency_stats(table.queue_delay()[done])),
        preemptions=int(table.preemptions.sum()),
        prefix_cache_hit_rate=_hit_rate(reps),
        steps=rec.step_count,
        busy_fraction=rec.busy_time / (span * len(reps)),
        pool_busy_fraction=_pool_busy(reps, prefill_replicas, span),
        front_end_busy_fraction=front_end[0] if front_end else None,
        mean_decode_batch=rec.mean_decode_batch(),
        **goodput,
        **saturation(table, work),
    )


def _front_end_load(reps: list[Replica], span: float) -> tuple[float, float] | None:
    """The replicas' API-server front-ends: the share of the run the busiest one was busy (a disaggregated
    prefill pool's stream only first tokens: a mean would hide the decode pool's), and their seconds per
    streamed token (None without front-ends)."""
    ends = [end for rep in reps if (end := getattr(rep, "front_end", None)) is not None]
    if not ends:
        return None
    return min(max(end.work for end in ends) / span, 1.0), ends[0].token_s


def _pool_busy(reps: list[Replica], prefill_replicas: int, span: float) -> dict[str, float] | None:
    """Busy fraction of a disaggregated run's prefill pool (its first ``prefill_replicas``) and decode pool."""
    if not prefill_replicas or prefill_replicas >= len(reps):
        return None
    pools = {"prefill": reps[:prefill_replicas], "decode": reps[prefill_replicas:]}
    return {k: sum(getattr(r, "busy", 0.0) for r in v) / (span * len(v)) for k, v in pools.items()}


def _hit_rate(reps: list[Replica]) -> float:
    looked = sum(r.kv.lookup_tokens for r in reps)
    return sum(r.kv.hits_tokens for r in reps) / looked if looked else 0.0


__all__ = [
    "ClusterConfig",
    "DisaggConfig",
    "EngineConfig",
    "KVLink",
    "ObserveConfig",
    "SimulationConfig",
    "SimulationResult",
    "SimulationSummary",
    "config_from_keywords",
    "run",
    "saturation",
    "simulate",
    "simulation_config",
    "summarize",
]
