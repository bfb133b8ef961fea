"""The options of `infercast simulate`, one type each, so that the command's signature lists them one per line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infercast.cli.common import JSON_HELP, KV_HELP
from infercast.sim.kv_link import KVLink

SCHEDULERS = (
    "static | prefill-first (continuous batching, whole prompts first) | chunked (chunked prefill) | "
    "inflight (whole prompts beside the decodes, KV reserved for prompt + output) | "
    "disagg (prefill and decode pools); default: the engine's"
)
DEFAULT_SPEC_ACCEPTANCE = 0.7
"""--spec-acceptance when --spec-tokens is given without it (a typical EAGLE-style draft on chat traffic)."""
KV_LINK_DEFAULT_GBPS = KVLink().bandwidth_bytes_s / 1e9
SENSITIVITY_HELP = (
    "Also run with a KV pool 10 % smaller and larger, and with every step 10 % shorter and longer, and report the "
    "mean TTFT of each (on by itself when the run sits on a KV or batch-slot cliff)."
)
JSON_FORMATS = ("infercast", "vllm")

# the replica: model, hardware, layout, engine
Model = Annotated[str, typer.Option(help="Catalog id or config.json path.")]
Gpu = Annotated[str, typer.Option(help="Accelerator id or hardware YAML file.")]
Tp = Annotated[int, typer.Option(help="Tensor-parallel GPUs per replica.")]
Ep = Annotated[int, typer.Option(help="Expert-parallel ways (MoE; must divide tp x attention-dp).")]
Pp = Annotated[int, typer.Option(help="Pipeline stages per replica (each tp x attention-dp GPUs).")]
AttentionDp = Annotated[
    int,
    typer.Option("--attention-dp", help="Attention data parallelism per stage (MoE wide EP; see predict)."),
]
Precision = Annotated[str | None, typer.Option(help="Weight/compute scheme (default: the model's).")]
KvPrecision = Annotated[str | None, typer.Option(help=KV_HELP)]
Engine = Annotated[
    str,
    typer.Option(
        help="Engine profile: vllm (vLLM 0.12), vllm-0.14, sglang (SGLang 0.5), trtllm (TensorRT-LLM 1.0), ideal."
    ),
]
Scheduler = Annotated[str | None, typer.Option(help=SCHEDULERS)]

# the requests
InputLen = Annotated[
    str | None,
    typer.Option(help="Prompt tokens: N or a distribution (uniform:a,b, normal:m,s, lognormal:median,sigma)."),
]
OutputLen = Annotated[str | None, typer.Option(help="Output tokens: N or a distribution.")]
Trace = Annotated[
    str | None,
    typer.Option(
        help="Trace CSV (arrived_at,num_prefill_tokens,num_decode_tokens), Mooncake JSONL, or azure_conv / azure_code."
    ),
]
NumRequests = Annotated[
    int | None,
    typer.Option(help="Requests to simulate (default 10 x --concurrency in a closed loop, else 1000; trace: all)."),
]
Rate = Annotated[float | None, typer.Option(help="Request rate (req/s), open loop.")]
Burstiness = Annotated[float, typer.Option(help="Gamma shape of inter-arrivals (1 = Poisson), as vLLM.")]
Concurrency = Annotated[int | None, typer.Option(help="Closed loop: N clients, each sends on completion.")]
Offline = Annotated[bool, typer.Option("--offline", help="All requests at t=0 (throughput test).")]

# the engine's knobs
MaxNumSeqs = Annotated[int | None, typer.Option(help="Scheduler sequence limit.")]
MaxNumBatchedTokens = Annotated[
    int | None,
    typer.Option("--max-num-batched-tokens", "--max-batched-tokens", help="Tokens per step (token budget)."),
]
BlockSize = Annotated[int | None, typer.Option(help="Tokens per KV block.")]
GpuMemoryUtilization = Annotated[float | None, typer.Option(help="Memory fraction for the engine.")]
NoPrefixCaching = Annotated[bool, typer.Option("--no-prefix-caching", help="Disable prefix caching.")]
PrefixLen = Annotated[int | None, typer.Option(help="Shared system prompt tokens added to every prompt (0: none).")]
NumPrefixes = Annotated[int | None, typer.Option(help="Distinct shared system prompts (default 1).")]
Preemption = Annotated[str, typer.Option(help="recompute | swap (PCIe cost) when KV blocks run out.")]
OverlapScheduler = Annotated[
    bool | None,
    typer.Option(
        "--overlap-scheduler/--no-overlap-scheduler",
        help="The engine plans step k + 1 while step k runs: a request arriving mid-step joins the step "
        "after next (default: the engine preset's; on for vllm-0.14, sglang and trtllm-1.1).",
    ),
]

# the cluster
Replicas = Annotated[int, typer.Option(help="Replicas behind the router.")]
RouterName = Annotated[str, typer.Option(help="round_robin | least_outstanding | prefix_affinity")]
PrefillInstances = Annotated[int | None, typer.Option(help="disagg: prefill replicas (default 1).")]
DecodeInstances = Annotated[int | None, typer.Option(help="disagg: decode replicas (default 1).")]
PrefillTp = Annotated[int | None, typer.Option(help="disagg: TP of prefill replicas (default --tp).")]
DecodeTp = Annotated[int | None, typer.Option(help="disagg: TP of decode replicas (default --tp).")]
KvLinkGbps = Annotated[
    float | None,
    typer.Option(help=f"disagg: KV transfer bandwidth per GPU, GB/s (default {KV_LINK_DEFAULT_GBPS:g})."),
]
Goodput = Annotated[str | None, typer.Option(help="SLOs in ms, e.g. --goodput ttft:200 tpot:50")]

# speculative decoding
SpecTokens = Annotated[int | None, typer.Option(help="Speculative decoding: draft tokens per step.")]
SpecAcceptance = Annotated[
    float | None,
    typer.Option(help=f"Speculative decoding: per-token acceptance rate (default {DEFAULT_SPEC_ACCEPTANCE:g})."),
]
DraftModel = Annotated[str | None, typer.Option(help="Speculative decoding: draft model id.")]
DraftCost = Annotated[
    float | None, typer.Option(help="Draft step / target decode step, without --draft-model (default 0.05).")
]
Seed = Annotated[int, typer.Option(help="Random seed (arrivals, lengths).")]

# the rate sweep
RateSweepFlag = Annotated[
    bool, typer.Option("--rate-sweep", help="Latency vs load; find the SLO capacity (highest rate meeting SLOs).")
]
Rates = Annotated[str | None, typer.Option(help="--rate-sweep: comma-separated rates (default: around capacity).")]
Attainment = Annotated[
    float | None, typer.Option(help="--rate-sweep: share of requests that must meet the SLOs (default 0.9).")
]

# outputs
RequestsOut = Annotated[Path | None, typer.Option(help="Write the per-request table (.csv or .parquet).")]
TraceOut = Annotated[
    Path | None,
    typer.Option(
        help="Write a Perfetto/Chrome trace (.json or .json.gz); its request track holds the first 200 requests "
        "by arrival unless --trace-all."
    ),
]
TraceAll = Annotated[
    bool,
    typer.Option("--trace-all", help="--trace-out: keep every request and every step in the trace (big files)."),
]
PlotDir = Annotated[Path | None, typer.Option(help="Write latency CDF and timeline plots here.")]
StepMode = Annotated[bool, typer.Option("--step-mode", help="Step token by token (slow; for checking).")]
JsonOut = Annotated[bool, typer.Option("--json", help=JSON_HELP)]
Sensitivity = Annotated[bool, typer.Option("--sensitivity", help=SENSITIVITY_HELP)]
JsonFormat = Annotated[
    str | None,
    typer.Option(help="JSON key names: infercast (default) or vllm (as `vllm bench serve --save-result`)."),
]
