"""The simulator configured as the engine runs: same model cut, formats, scheduler, limits and KV blocks.

The simulator's replica sizes its KV cache from the hardware's memory; the engine's pool is whatever it was
given, so the replica's cache is replaced by one of exactly the engine's blocks (same block size, same
prefix-cache units) before the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from infercast.cost.profile import CostProfile
from infercast.errors import require_positive_int
from infercast.sim.api import SimulationResult, summarize
from infercast.sim.blocks import BlockLedger
from infercast.sim.cluster import Coordinator, Router
from infercast.sim.config import EngineConfig as ReplicaEngineConfig
from infercast.sim.kv_cache import KVCache
from infercast.sim.recorder import Recorder
from infercast.sim.replica import Replica
from infercast.sim.state import RequestTable
from infercast.sim.workload import Workload
from infercast.specs.deployment import Deployment
from infercast.specs.engine import EngineSpec
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.truncate import truncated

ENGINE_SPEC = EngineSpec(
    id="infercast-engine",
    description="infercast's own PyTorch engine (src/infercast/engine): paged KV, continuous batching, eager",
    kv_fraction=1.0,
    kv_fraction_of="total",
    block_size=16,
    max_num_seqs=64,
    max_num_batched_tokens=512,
    scheduler="chunked",
    cuda_context_bytes=0.0,
    cuda_graph_bytes=0.0,
    comm_buffer_bytes=0.0,
    sources={"*": "this repository's engine; its limits are set per run (HarnessEngineConfig), not by defaults"},
)


@dataclass(frozen=True)
class HarnessEngineConfig:
    """How an engine run is set up: what both executors (engine and simulator) must agree on."""

    model: ModelSpec
    num_layers: int | None = None
    precision: str = "bf16"
    scheduler: str = "chunked"
    num_blocks: int = 256
    block_size: int = 16
    max_num_seqs: int = 16
    max_num_batched_tokens: int = 256
    prefix_caching: bool = True

    def __post_init__(self) -> None:
        for name in ("num_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens"):
            object.__setattr__(self, name, require_positive_int(name, getattr(self, name)))

    @property
    def model_cut(self) -> ModelSpec:
        """The model as built (first ``num_layers`` layers): what the cost model must price."""
        return self.model if self.num_layers is None else truncated(self.model, self.num_layers)


def deployment(config: HarnessEngineConfig, hardware: HardwareSpec) -> Deployment:
    return Deployment.resolve(config.model_cut, hardware, precision=config.precision, engine=ENGINE_SPEC)


def simulate_engine(
    config: HarnessEngineConfig,
    hardware: HardwareSpec,
    profile: CostProfile,
    work: Workload,
    *,
    skip: bool = True,
    trace_steps: int = 0,
) -> SimulationResult:
    """Simulate ``work`` on the engine ``config`` describes, with ``profile``'s step times."""
    table = RequestTable(work)
    recorder = Recorder(trace_limit=trace_steps)
    dep = deployment(config, hardware)
    engine = ReplicaEngineConfig(
        config.scheduler,
        config.max_num_seqs,
        config.max_num_batched_tokens,
        config.block_size,
        None,
        config.prefix_caching,
        "recompute",
    )
    rep = Replica(0, dep, engine, table, recorder, profile=profile, step_mode=not skip)
    hash_bs = work.hash_block_size if work.block_hashes is not None else config.block_size
    rep.blocks = BlockLedger(KVCache(config.num_blocks, config.block_size, config.prefix_caching, hash_bs), table)
    Coordinator(table, [rep], Router("round_robin", table), closed_loop=work.closed_loop).run()
    table.freeze()
    info = {
        "model": dep.model.id,
        "gpu": hardware.id,
        "scheduler": config.scheduler,
        "workload": work.name,
        "kv_blocks_per_replica": config.num_blocks,
        "block_size": config.block_size,
    }
    return SimulationResult(summarize(table, recorder, [rep], None, work), table, recorder, info, [rep])
