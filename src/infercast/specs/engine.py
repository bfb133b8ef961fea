"""Serving-engine runtime settings (memory reservation, KV paging, scheduler limits) from engines.yaml."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from infercast.errors import unknown_choice
from infercast.files import parse_package_yaml

if TYPE_CHECKING:
    from infercast.specs.hardware import HardwareSpec


class GpuTier(BaseModel):
    """Batch limits an engine takes by default on GPUs with at least this much memory (and at least ``min_tp``
    tensor-parallel ranks) instead of its base ones (vLLM's ``EngineArgs.get_batch_defaults``: 70 GiB, A100
    excepted; SGLang's ``chunked_prefill_size`` and ``cuda_graph_max_bs`` by device memory and TP). A limit left
    out keeps a smaller tier's value, else the base one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_memory_gib: float = Field(gt=0, description="Device memory as the driver reports it (MemorySpec.usable).")
    min_tp: int = Field(default=1, ge=1, description="Tensor-parallel ranks from which the tier applies.")
    excluded: tuple[str, ...] = Field(default=(), description="GPU ids containing one of these skip this tier.")
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    graph_max_tokens: int | None = Field(default=None, ge=0)


TIER_LIMITS = ("max_num_seqs", "max_num_batched_tokens", "graph_max_tokens")
"""The engine settings a GPU tier may set."""


MOE_BACKENDS = ("marlin", "triton", "trtllm", "deepgemm")
"""The fused-MoE kernels a launch may pick over the release default (``EngineSpec.moe_backend``); records and the
sweep launch file name them by these words."""
GRAPH_SCOPES = ("tokens", "decode")
"""Which steps replay as CUDA graphs (``EngineSpec.cuda_graphs``): any step up to a size in tokens, or steps
without prompt tokens up to a batch size in sequences."""


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
        "SGLang, vLLM's async scheduling; on in the vllm-0.14, sglang and trtllm-1.1 presets, see "
        "docs/accuracy-notes.md): a request that arrives during a step joins the step after next.",
    )
    cuda_context_bytes: float = Field(ge=0)
    cuda_graph_bytes: float = Field(
        ge=0,
        description="Memory the captured CUDA graphs hold (0: no graphs). Which step sizes replay as graphs, and "
        "so the launch cost, is graph_max_tokens (else the cost profile's, cost/profiles/defaults.yaml) with "
        "cuda_graphs.",
    )
    cuda_graphs: Literal["tokens", "decode"] = Field(
        default="tokens",
        description="Which steps replay as CUDA graphs: 'tokens' any step of at most graph_max_tokens tokens (vLLM "
        "V1's piecewise graphs cover mixed prefill-decode batches; TensorRT-LLM's with prefill_cuda_graph_backend "
        "piecewise or breakable, formerly torch_compile_config enable_piecewise_cuda_graph; SGLang's with "
        "--enable-piecewise-cuda-graph), 'decode' only steps "
        "without prompt tokens of at most graph_max_tokens sequences (graphs captured for generation batches "
        "alone, by batch size: TensorRT-LLM's PyTorch backend, SGLang, vLLM V0 and V1 with cudagraph_mode "
        "FULL_DECODE_ONLY, infercast's harness; a "
        "draft-verify step's tokens ride in its sequences' graph); the other steps launch their kernels eagerly. "
        "Per attention-DP rank where the engine's limits are.",
    )
    graph_max_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Largest step the launch replays as a CUDA graph, in tokens or, for 'decode' graphs, sequences "
        "(vLLM --max-cudagraph-capture-size or --compilation-config, 0 with --enforce-eager; SGLang "
        "--cuda-graph-max-bs, 0 with --disable-cuda-graph; TensorRT-LLM cuda_graph_config.max_batch_size, or with "
        "prefill graphs the largest of prefill_capture_num_tokens, formerly torch_compile_config.capture_num_tokens; "
        "SGLang's piecewise graphs up to --piecewise-cuda-graph-max-tokens); None: the cost profile's "
        "graph_max_tokens, the release default.",
    )
    moe_backend: Literal["marlin", "triton", "trtllm", "deepgemm"] | None = Field(
        default=None,
        description="The fused-MoE kernel a launch picks where the engine offers several for the experts' format: "
        "'marlin', vLLM's Marlin W4A16 kernel for MXFP4 experts (VLLM_MXFP4_USE_MARLIN=1; on Hopper its default is "
        "OpenAI's Triton kernel); 'triton', vLLM's Triton kernel for block-FP8 experts (VLLM_USE_FLASHINFER_MOE_FP8=0 "
        "with VLLM_MOE_USE_DEEP_GEMM=0; on Blackwell its default is FlashInfer's), and for MXFP4 experts OpenAI's "
        "Triton kernel (TensorRT-LLM moe_config.backend TRITON; vLLM's own default on Hopper); 'trtllm', "
        "TensorRT-LLM's TRTLLM backend (moe_config.backend TRTLLM: the trtllm-gen kernels, one call per MoE layer "
        "on Blackwell, which vLLM and SGLang run MXFP4 experts through by default there); 'deepgemm', its DEEPGEMM "
        "backend; None: the release default (TensorRT-LLM: CUTLASS), the kernel the cost profile's tables time.",
    )
    comm_buffer_bytes: float = Field(ge=0, description="Only reserved when tp > 1.")
    fp8_kv_schemes: tuple[str, ...] = Field(
        default=(),
        description="Weight schemes (--precision) whose checkpoints this engine serves with an 8-bit KV cache by "
        "default: its 'auto' KV dtype follows the checkpoint's kv_cache_quant_algo (sources: fp8_kv_schemes).",
    )
    limits_per_dp_rank: bool = Field(
        default=False,
        description="With attention data parallelism, max_num_seqs and max_num_batched_tokens bound each attention "
        "rank's own scheduler (TensorRT-LLM, vLLM), not the replica's total (SGLang divides them over the ranks).",
    )
    recv_interval: int = Field(
        default=1,
        ge=1,
        description="Decode steps between the scheduler's polls for new requests (SGLang --scheduler-recv-interval; "
        "1: every step). A request that reaches the engine during a run of decode steps waits for the next poll; "
        "a step with prompt tokens is followed by a poll.",
    )
    batch_wait_iters: int = Field(
        default=0,
        ge=0,
        description="Steps a prompt may be held back while decodes run, waiting for more prompts to batch "
        "(TensorRT-LLM batch_wait_timeout_iters; 0: none). Held until the step's prompt and decode tokens reach "
        "batch_wait_ratio x the step budget or this many steps passed; not with attention data parallelism.",
    )
    batch_wait_ratio: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of the step budget a step's tokens must reach to stop the wait (TensorRT-LLM "
        "batch_wait_max_tokens_ratio; with either setting 0 no prompt waits).",
    )
    adp_balance_iters: int = Field(
        default=0,
        ge=0,
        description="With attention data parallelism, steps a prompt may be held until every rank has one "
        "(TensorRT-LLM attention_dp_config enable_balance with timeout_iters; 0: off). The count runs every step "
        "and restarts at each release; ranks without decodes release at once.",
    )
    gpu_tiers: tuple[GpuTier, ...] = ()
    sources: dict[str, str] = Field(default_factory=dict)

    @property
    def release(self) -> str:
        """The engine release whose defaults this preset holds, as its description opens ('vLLM 0.12',
        'TensorRT-LLM 1.0'); empty for presets of no release ('ideal', infercast's own harness)."""
        found = re.match(r"(\S+ v?\d+(?:\.\d+)*(?:-\d+(?:\.\d+)*)?)(?=[\s(:,]|$)", self.description)
        return found.group(1) if found else ""

    @property
    def label(self) -> str:
        """The id with the release it models, for titles: 'vllm (vLLM 0.12)'; the id alone without a release."""
        return f"{self.id} ({self.release})" if self.release else self.id

    def for_hardware(self, hw: HardwareSpec, tp: int = 1) -> EngineSpec:
        """The preset as the engine sets itself up on ``hw`` at ``tp`` ranks: each limit from the largest tier
        (memory, then TP) that reaches and sets it (and is not excluded from), the base value below every tier."""
        memory = hw.memory.usable
        reached = [
            t
            for t in self.gpu_tiers
            if memory >= t.min_memory_gib * 2**30 and tp >= t.min_tp and not any(x in hw.id for x in t.excluded)
        ]
        limits: dict[str, int] = {}
        for name in TIER_LIMITS:
            setting = [t for t in reached if getattr(t, name) is not None]
            if setting:
                limits[name] = getattr(max(setting, key=lambda t: (t.min_memory_gib, t.min_tp)), name)
        return self.model_copy(update=limits) if limits else self


@cache
def engine_catalog() -> dict[str, EngineSpec]:
    text = resources.files("infercast.specs.data").joinpath("engines.yaml").read_text()
    return {e.id: e for e in (EngineSpec.model_validate(x) for x in parse_package_yaml(text))}


def engine_label(ref: str) -> str:
    """:attr:`EngineSpec.label` of a catalog id ('vllm (vLLM 0.12)'); an unknown id as given."""
    found = engine_catalog().get(str(ref).strip().lower())
    return found.label if found else str(ref)


def get_engine(ref: str | EngineSpec) -> EngineSpec:
    if isinstance(ref, EngineSpec):
        return ref
    catalog = engine_catalog()
    key = str(ref).strip().lower()
    if key not in catalog:
        raise unknown_choice("engine", str(ref), catalog)
    return catalog[key]
