"""Typed, validated configuration of one simulation: what is deployed, how the engine schedules, how replicas
are arranged, which requests arrive, and what is observed.

:class:`SimulationConfig` groups them; every part validates itself on construction and raises an
:class:`~infercast.errors.InfercastError` naming the bad field (the field name, never a CLI flag: the CLI
maps fields to its options). Configs are frozen: vary one with :func:`dataclasses.replace`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infercast.cost.profile import CostProfile
from infercast.errors import (
    InfercastError,
    require_fraction,
    require_positive_int,
    require_positive_number,
    unknown_choice,
)
from infercast.limits import BYTES_PER_SEQUENCE_SLOT, require_count
from infercast.sim.kv_link import KVLink
from infercast.sim.metrics import SLO
from infercast.sim.scheduler import engine_scheduler, scheduler_name
from infercast.sim.speculative import SpeculativeConfig
from infercast.sim.workload import Workload, WorkloadSpec
from infercast.specs.deployment import Deployment

PREEMPTION_MODES = ("recompute", "swap")
MAX_REPLICAS = 10_000
"""Most replicas (or pool instances) one simulation takes: each costs ~1 ms to set up and is stepped in Python;
the largest fleets serving one model run thousands of replicas."""
MAX_TOKENS = 2**31 - 1
"""Largest token budget or block size (int32), far beyond any engine's, so products of sizes stay exact."""
MAX_SEQS_BYTES = BYTES_PER_SEQUENCE_SLOT
ROUTERS = ("round_robin", "least_outstanding", "prefix_affinity")


def require_at_most(name: str, value: int, limit: int) -> int:
    """``value`` unless it exceeds ``limit``: then a one-line error saying the limit."""
    if value > limit:
        raise InfercastError(f"{value} is more than the limit of {limit:,}", field=name)
    return value


def _require_type(name: str, value: object, kind: type | tuple[type, ...], what: str) -> None:
    if not isinstance(value, kind):
        raise InfercastError(f"must be {what}, got {type(value).__name__}", field=name)


@dataclass(frozen=True)
class EngineConfig:
    """How each replica's engine schedules and holds KV. None: the engine preset's value (``EngineSpec``)."""

    scheduler: str | None = None
    """static | prefill-first (alias: vllm) | chunked (alias: sarathi) | inflight; None: the preset's ``scheduler``."""
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    prefix_caching: bool = True
    preemption: str = "recompute"
    """recompute (drop the KV, prefill again) | swap (to host memory over PCIe and back)."""
    speculative: SpeculativeConfig | None = None
    overlap_scheduler: bool | None = None
    """Whether the engine schedules step k + 1 while step k runs (a request arriving during a step joins the step
    after next); None: the preset's ``overlap_scheduler``."""
    recv_interval: int | None = None
    """Decode steps between the scheduler's polls for new requests (SGLang ``--scheduler-recv-interval``); None:
    the preset's ``recv_interval``."""
    batch_wait_iters: int | None = None
    """Steps a prompt may wait for more prompts while decodes run (TensorRT-LLM ``batch_wait_timeout_iters``); None:
    the preset's ``batch_wait_iters``."""
    batch_wait_ratio: float | None = None
    """Share of the step budget that ends that wait (``batch_wait_max_tokens_ratio``); None: the preset's."""
    adp_balance_iters: int | None = None
    """Attention-DP prompt balancing timeout (TensorRT-LLM ``attention_dp_config.timeout_iters`` with
    ``enable_balance``); None: the preset's ``adp_balance_iters``."""
    kv_pool_scale: float = 1.0
    """Multiplies each replica's KV blocks (sensitivity checks: TTFT at a pool 10 % smaller or larger)."""
    step_time_scale: float = 1.0
    """Multiplies every engine step's time from the cost model, speculative draft and verify passes included (not
    host swap transfers, KV hand-offs, request overheads or the API front-end): TTFT at step time 10 % off."""

    def __post_init__(self) -> None:
        if self.scheduler is not None:
            object.__setattr__(self, "scheduler", scheduler_name(self.scheduler))
        if self.max_num_seqs is not None:
            object.__setattr__(self, "max_num_seqs", require_count("max_num_seqs", self.max_num_seqs, MAX_SEQS_BYTES))
        for name in ("max_num_batched_tokens", "block_size"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, require_at_most(name, require_positive_int(name, value), MAX_TOKENS))
        if self.recv_interval is not None:
            value = require_at_most("recv_interval", require_positive_int("recv_interval", self.recv_interval), 10_000)
            object.__setattr__(self, "recv_interval", value)
        if self.batch_wait_iters is not None:
            value = require_at_most(
                "batch_wait_iters", require_positive_int("batch_wait_iters", self.batch_wait_iters, minimum=0), 10_000
            )
            object.__setattr__(self, "batch_wait_iters", value)
        if self.adp_balance_iters is not None:
            value = require_positive_int("adp_balance_iters", self.adp_balance_iters, minimum=0)
            object.__setattr__(self, "adp_balance_iters", require_at_most("adp_balance_iters", value, 10_000))
        if self.batch_wait_ratio is not None:
            ratio = require_positive_number("batch_wait_ratio", self.batch_wait_ratio, allow_zero=True)
            if ratio > 1:
                raise InfercastError(f"must be in [0, 1], got {ratio:g}", field="batch_wait_ratio")
            object.__setattr__(self, "batch_wait_ratio", ratio)
        if self.gpu_memory_utilization is not None:
            value = require_fraction("gpu_memory_utilization", self.gpu_memory_utilization)
            object.__setattr__(self, "gpu_memory_utilization", value)
        if not isinstance(self.prefix_caching, bool):
            raise InfercastError(f"must be True or False, got {self.prefix_caching!r}", field="prefix_caching")
        if self.preemption not in PREEMPTION_MODES:
            raise unknown_choice("preemption", str(self.preemption), PREEMPTION_MODES)
        if self.speculative is not None:
            _require_type("speculative", self.speculative, SpeculativeConfig, "a SpeculativeConfig or None")
        for name in ("kv_pool_scale", "step_time_scale"):
            object.__setattr__(self, name, require_positive_number(name, getattr(self, name)))
        if self.overlap_scheduler is not None and not isinstance(self.overlap_scheduler, bool):
            raise InfercastError(
                f"must be True, False or None, got {self.overlap_scheduler!r}", field="overlap_scheduler"
            )


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
            object.__setattr__(
                self, name, require_at_most(name, require_positive_int(name, getattr(self, name)), MAX_REPLICAS)
            )
        for name in ("prefill_tp", "decode_tp"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, require_positive_int(name, value))
        _require_type("link", self.link, KVLink, "a KVLink")


def split_scheduler(scheduler: str | None, disagg: DisaggConfig | None) -> tuple[str | None, DisaggConfig | None]:
    """The replicas' scheduler and pools from a scheduler name that may be ``disagg`` (prefill and decode pools,
    sized by ``disagg``, default one of each, both running chunked prefill); a ``disagg`` config needs it."""
    sched = None if scheduler is None else scheduler_name(scheduler, extra=("disagg",))
    if disagg is not None and sched != "disagg":
        raise InfercastError(f"a DisaggConfig needs scheduler='disagg' (got {sched!r})", field="disagg")
    if sched != "disagg":
        return sched, None
    disagg = DisaggConfig() if disagg is None else disagg
    _require_type("disagg", disagg, DisaggConfig, "a DisaggConfig")
    return "chunked", disagg


@dataclass(frozen=True)
class ClusterConfig:
    """How replicas are arranged: ``replicas`` behind a ``router``, or prefill and decode pools (``disagg``)."""

    replicas: int = 1
    router: str = "round_robin"
    disagg: DisaggConfig | None = None

    def __post_init__(self) -> None:
        replicas = require_positive_int("replicas", self.replicas)
        object.__setattr__(self, "replicas", require_at_most("replicas", replicas, MAX_REPLICAS))
        if not isinstance(self.router, str) or self.router not in ROUTERS:
            raise unknown_choice("router", str(self.router), ROUTERS)
        if self.disagg is not None:
            _require_type("disagg", self.disagg, DisaggConfig, "a DisaggConfig or None")
            if self.replicas != 1:
                raise InfercastError(
                    "disaggregated pools are sized by DisaggConfig(prefill_instances, decode_instances), not replicas",
                    field="replicas",
                )


@dataclass(frozen=True)
class ObserveConfig:
    """What is measured besides the summary: SLOs for goodput, the step trace, occupancy sampling."""

    goodput: SLO | None = None
    """SLOs a request must meet to count as goodput; also vLLM-style specs ``["ttft:200", "tpot:50"]`` (ms)."""
    trace_steps: int = 0
    """Engine steps kept for the timeline trace (0: none)."""
    sample_interval: float = 1.0
    """Simulated seconds between occupancy samples per replica."""

    def __post_init__(self) -> None:
        if self.goodput is not None and not isinstance(self.goodput, SLO):
            object.__setattr__(self, "goodput", SLO.parse(self.goodput))
        object.__setattr__(self, "trace_steps", require_positive_int("trace_steps", self.trace_steps, minimum=0))
        interval = require_positive_number("sample_interval", self.sample_interval, allow_zero=True)
        object.__setattr__(self, "sample_interval", interval)


@dataclass(frozen=True)
class SimulationConfig:
    """Everything one simulation needs (see module docstring).

    ``workload``: a :class:`WorkloadSpec` (a :class:`Workload` is wrapped in one). ``profile``: cost-model
    parameters (None: the installed profiles). ``step_mode``: step token by token instead of accounting
    decode spans in closed form (same results, slow; for checking).
    """

    deployment: Deployment
    workload: WorkloadSpec
    engine: EngineConfig = field(default_factory=EngineConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    observe: ObserveConfig = field(default_factory=ObserveConfig)
    profile: CostProfile | None = None
    step_mode: bool = False

    def __post_init__(self) -> None:
        _require_type("deployment", self.deployment, Deployment, "a Deployment (Deployment.resolve(model, gpu, ...))")
        if isinstance(self.workload, Workload):
            object.__setattr__(self, "workload", WorkloadSpec(workload=self.workload))
        _require_type("workload", self.workload, WorkloadSpec, "a WorkloadSpec or a Workload")
        _require_type("engine", self.engine, EngineConfig, "an EngineConfig")
        _require_type("cluster", self.cluster, ClusterConfig, "a ClusterConfig")
        _require_type("observe", self.observe, ObserveConfig, "an ObserveConfig")
        if self.profile is not None:
            _require_type("profile", self.profile, CostProfile, "a CostProfile or None")
        if not isinstance(self.step_mode, bool):
            raise InfercastError(f"must be True or False, got {self.step_mode!r}", field="step_mode")
        if self.cluster.disagg is not None and self.engine.scheduler not in (None, "chunked"):
            raise InfercastError(
                f"disaggregated pools run chunked prefill, not {self.engine.scheduler!r}", field="scheduler"
            )

    @property
    def scheduler(self) -> str:
        """The scheduler every replica runs (``disagg`` for disaggregated pools, which run chunked prefill)."""
        if self.cluster.disagg is not None:
            return "disagg"
        return self.engine.scheduler or engine_scheduler(self.deployment.engine)


__all__ = [
    "PREEMPTION_MODES",
    "ClusterConfig",
    "DisaggConfig",
    "EngineConfig",
    "ObserveConfig",
    "SimulationConfig",
    "split_scheduler",
]
