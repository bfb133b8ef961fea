"""Serving-engine runtime settings (memory reservation, KV paging, scheduler limits) from engines.yaml."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from infercast.errors import unknown_choice
from infercast.files import parse_package_yaml

if TYPE_CHECKING:
    from infercast.specs.hardware import HardwareSpec


class LargeGpuDefaults(BaseModel):
    """Batch limits an engine takes by default on large GPUs instead of its base ones (vLLM's
    ``EngineArgs.get_batch_defaults``: at least 70 GiB of device memory, A100 excepted)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_memory_gib: float = Field(gt=0, description="Device memory as the driver reports it (MemorySpec.usable).")
    excluded: tuple[str, ...] = Field(default=(), description="GPU ids containing one of these keep the base values.")
    max_num_seqs: int = Field(ge=1)
    max_num_batched_tokens: int = Field(ge=1)


class EngineSpec(BaseModel):
    """How an engine reserves memory and sizes its batches (its documented defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    description: str
    kv_fraction: float = Field(gt=0, le=1, description="gpu_memory_utilization / free_gpu_memory_fraction.")
    kv_fraction_of: Literal["total", "free"] = Field(
        description="'total': fraction of all memory minus reservations (vLLM, SGLang); "
        "'free': fraction of what is free after weights and reservations (TensorRT-LLM)."
    )
    block_size: int = Field(ge=1, description="Tokens per KV block (page).")
    max_num_seqs: int = Field(ge=1)
    max_num_batched_tokens: int = Field(ge=1)
    scheduler: Literal["chunked", "prefill-first", "inflight"] = Field(
        description="How the engine fills a step (sim/scheduler): 'chunked' splits prompts to fill the token budget "
        "beside the decodes (vLLM V1), 'prefill-first' runs whole prompts in steps of their own while decodes wait "
        "(vLLM V0, SGLang without mixed chunks), 'inflight' adds whole prompts beside the decodes while they fit "
        "(TensorRT-LLM without chunked prefill)."
    )
    overlap_scheduler: bool = Field(
        default=False,
        description="The engine schedules step k + 1 while step k runs on the GPU (TensorRT-LLM's PyTorch backend, "
        "SGLang; off in the presets, see docs/accuracy-notes.md): a request that arrives during a step joins the step "
        "after next.",
    )
    cuda_context_bytes: float = Field(ge=0)
    cuda_graph_bytes: float = Field(
        ge=0,
        description="Memory the captured CUDA graphs hold (0: no graphs). Which step sizes replay as graphs, and "
        "so the launch cost, is the cost profile's graph_max_tokens (cost/profiles/defaults.yaml) with cuda_graphs.",
    )
    cuda_graphs: Literal["tokens", "decode"] = Field(
        default="tokens",
        description="Which steps of at most graph_max_tokens tokens replay as CUDA graphs: 'tokens' any (vLLM V1's "
        "piecewise graphs cover mixed prefill-decode batches), 'decode' only steps without prompt tokens (graphs "
        "captured for generation batches alone: TensorRT-LLM's PyTorch backend, SGLang, vLLM V0, infercast's "
        "harness); the other steps launch their kernels eagerly.",
    )
    comm_buffer_bytes: float = Field(ge=0, description="Only reserved when tp > 1.")
    large_gpu: LargeGpuDefaults | None = None
    sources: dict[str, str] = Field(default_factory=dict)

    def for_hardware(self, hw: HardwareSpec) -> EngineSpec:
        """The preset as the engine sets itself up on ``hw``: its large-GPU batch limits where they apply."""
        big = self.large_gpu
        if big is None or hw.memory.usable < big.min_memory_gib * 2**30 or any(x in hw.id for x in big.excluded):
            return self
        return self.model_copy(update={"max_num_seqs": big.max_num_seqs,
                                       "max_num_batched_tokens": big.max_num_batched_tokens})  # fmt: skip


@cache
def engine_catalog() -> dict[str, EngineSpec]:
    text = resources.files("infercast.specs.data").joinpath("engines.yaml").read_text()
    return {e.id: e for e in (EngineSpec.model_validate(x) for x in parse_package_yaml(text))}


def get_engine(ref: str | EngineSpec) -> EngineSpec:
    if isinstance(ref, EngineSpec):
        return ref
    catalog = engine_catalog()
    key = str(ref).strip().lower()
    if key not in catalog:
        raise unknown_choice("engine", str(ref), catalog)
    return catalog[key]
