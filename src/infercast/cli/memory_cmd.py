"""`infercast memory`: does it fit, and how much concurrency / context does the KV pool allow."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated

import typer

from infercast.analysis.render import render_memory
from infercast.cli.common import (
    JSON_HELP,
    KV_HELP,
    AttentionDpOption,
    EpOption,
    PpOption,
    ReplicaFlags,
    console,
    emit_json,
)
from infercast.memory import MemoryBudget, memory_budget, what_would_fit
from infercast.specs.deployment import Deployment


@dataclass(frozen=True)
class MemorySizes:
    """The run's sizes ``memory`` budgets for (None: the engine's default, or what the pool allows)."""

    context: int | None
    concurrency: int | None
    gpu_memory_utilization: float | None
    block_size: int | None
    max_num_batched_tokens: int | None
    max_num_seqs: int | None

    def budget(self, dep: Deployment) -> MemoryBudget:
        """Per-GPU memory of ``dep`` run with these sizes."""
        return memory_budget(dep, **asdict(self))

    def would_fit(self, dep: Deployment) -> list[dict[str, object]]:
        """Layouts near ``dep`` that fit these sizes (:func:`infercast.memory.what_would_fit`)."""
        return what_would_fit(dep, **asdict(self))


def memory(
    model: Annotated[str, typer.Option(help="Catalog id or config.json path.")] = "llama-3.1-8b",
    gpu: Annotated[
        str, typer.Option(help="Accelerator id (see `infercast gpus`) or a hardware YAML file.")
    ] = "h100-sxm",
    tp: Annotated[int, typer.Option(help="Tensor-parallel GPUs per replica.")] = 1,
    ep: EpOption = 1,
    pp: PpOption = 1,
    attention_dp: AttentionDpOption = 1,
    precision: Annotated[
        str | None,
        typer.Option(
            help="Weight/compute scheme: bf16, fp16, fp8, int8, w8a16, "
            "int4, nvfp4, mxfp4, mxfp4-moe, int4-moe (default: the model's; fp16 on chips without bf16)."
        ),
    ] = None,
    kv_precision: Annotated[str | None, typer.Option(help=KV_HELP)] = None,
    engine: Annotated[str, typer.Option(help="Engine memory policy: vllm, vllm-0.14, sglang, trtllm, ideal.")] = "vllm",
    context: Annotated[int | None, typer.Option(help="Tokens per sequence (prompt + output).")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Concurrent sequences.")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option(help="Fraction of memory the engine may use.")] = None,
    block_size: Annotated[int | None, typer.Option(help="Tokens per KV block.")] = None,
    max_batched_tokens: Annotated[
        int | None,
        typer.Option(help="The run's step token budget, which sizes the activation reserve (default: the engine's)."),
    ] = None,
    max_num_seqs: Annotated[
        int | None,
        typer.Option(help="The run's sequence limit, which sizes the sampler's reserve (default: the engine's)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Per-GPU memory budget: weights, KV cache, activations, runtime; fits or not and by how much."""
    replica = ReplicaFlags(
        model,
        gpu,
        tp=tp,
        ep=ep,
        pp=pp,
        attention_dp=attention_dp,
        precision=precision,
        kv_precision=kv_precision,
        engine=engine,
    )
    dep = replica.deployment()
    sizes = MemorySizes(
        context=context,
        concurrency=concurrency,
        gpu_memory_utilization=gpu_memory_utilization,
        block_size=block_size,
        max_num_batched_tokens=max_batched_tokens,
        max_num_seqs=max_num_seqs,
    )
    budget = sizes.budget(dep)
    # when it does not fit: the nearest layouts that would (more TP, narrower weights, an fp8 KV cache)
    options = [] if budget.fits else sizes.would_fit(dep)
    if json_out:
        emit_json({**budget.to_dict(), **({} if budget.fits else {"would_fit": options})})
        return
    console.print(render_memory(budget))
    if not budget.fits:
        console.print(
            "would fit: " + "; or ".join(str(o["flags"]) for o in options)
            if options
            else "no layout within tp 16 and 4-bit weights fits: lower --context or --concurrency",
            markup=False,
            highlight=False,
        )
