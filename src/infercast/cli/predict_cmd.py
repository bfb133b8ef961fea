"""`infercast predict`: one scenario, the two-phase report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from infercast.analysis.render import render_prediction
from infercast.analysis.scenario import Prediction
from infercast.analysis.scenario import predict as run_predict
from infercast.cli.common import (
    JSON_HELP,
    KV_HELP,
    AttentionDpOption,
    EpOption,
    PpOption,
    ReplicaFlags,
    StreamTokenOption,
    console,
    emit_json,
    err_console,
    stream_token_seconds,
)
from infercast.cli.launch_opts import (
    LaunchOption,
    apply_launch,
    engine_settings,
    launch_drafts,
    print_settings,
)

PRECISION_HELP = (
    "Weight/compute scheme: bf16, fp16, fp8, int8, w8a16, int4, nvfp4, mxfp4, mxfp4-moe, int4-moe "
    "(default: the model's; fp16 on chips without bf16)."
)


@dataclass(frozen=True)
class PredictScenario:
    """What ``predict`` predicts: a static batch of requests of one shape on one replica."""

    replica: ReplicaFlags
    input_len: int
    output_len: int
    batch: int
    chunk_size: int | None
    stream_token_s: float | None

    def run(self) -> Prediction:
        """The two-phase prediction (:func:`infercast.analysis.scenario.predict`)."""
        return run_predict(
            self.replica.deployment(),
            input_len=self.input_len,
            output_len=self.output_len,
            batch=self.batch,
            chunk_size=self.chunk_size,
            stream_token_s=self.stream_token_s,
        )


def predict(
    model: Annotated[str, typer.Option(help="Catalog id or config.json path.")] = "llama-3.1-8b",
    gpu: Annotated[str, typer.Option(help="Accelerator id or hardware YAML file.")] = "h100-sxm",
    input_len: Annotated[int, typer.Option(help="Prompt tokens.")] = 2048,
    output_len: Annotated[int, typer.Option(help="Output tokens.")] = 256,
    batch: Annotated[int, typer.Option(help="Static batch size (requests run together).")] = 1,
    tp: Annotated[int, typer.Option(help="Tensor-parallel GPUs per replica.")] = 1,
    ep: EpOption = 1,
    pp: PpOption = 1,
    attention_dp: AttentionDpOption = 1,
    precision: Annotated[str | None, typer.Option(help=PRECISION_HELP)] = None,
    kv_precision: Annotated[str | None, typer.Option(help=KV_HELP)] = None,
    engine: Annotated[
        str,
        typer.Option(
            help="Engine profile: vllm (vLLM 0.12), vllm-0.14 (async scheduling), sglang (SGLang 0.5), trtllm "
            "(TensorRT-LLM 1.0), ideal (pure roofline)."
        ),
    ] = "vllm",
    stream_token_us: StreamTokenOption = None,
    chunk_size: Annotated[
        int | None, typer.Option(help="Chunked prefill: tokens per step (default: one step).")
    ] = None,
    ops: Annotated[bool, typer.Option("--ops", help="Show the per-operator tables.")] = False,
    launch: LaunchOption = None,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Predict TTFT, TPOT, ITL, end-to-end latency, throughput and memory, and explain each phase."""
    engine_used, tp, kv_precision, (ep, attention_dp) = apply_launch(
        launch, engine, tp, kv_precision, layout=(ep, attention_dp)
    )
    if launch_drafts(launch):
        err_console.print("warning: launch: predict runs without its speculative decoding; simulate applies it")
    replica = ReplicaFlags(
        model,
        gpu,
        tp=tp,
        ep=ep,
        pp=pp,
        attention_dp=attention_dp,
        precision=precision,
        kv_precision=kv_precision,
        engine=engine_used,
    )
    scenario = PredictScenario(
        replica,
        input_len=input_len,
        output_len=output_len,
        batch=batch,
        chunk_size=chunk_size,
        stream_token_s=stream_token_seconds(stream_token_us),
    )
    result = scenario.run()
    dep = replica.deployment()
    if json_out:
        emit_json({**result.to_dict(ops=ops), "engine_settings": engine_settings(dep).to_dict()})
    else:
        console.print(render_prediction(result, ops=ops))
        print_settings(dep)
