"""`infercast simulate`: replay traffic against a configuration; `--rate-sweep` for latency vs load."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from infercast.cli.common import (
    JSON_HELP,
    KV_HELP,
    StreamTokenOption,
    console,
    emit_json,
    err_console,
    parse_float_list,
    stream_token_seconds,
    wrote,
)
from infercast.cli.flags import with_flags
from infercast.cli.launch_opts import LaunchOption, apply_launch, engine_settings, print_settings
from infercast.display import fmt_time
from infercast.errors import InfercastError, require_positive_int, require_positive_number, unknown_choice
from infercast.files import check_output_dir, check_output_file, make_dir
from infercast.sim.export import CSV_SUFFIXES, PARQUET_SUFFIXES
from infercast.sim.kv_link import KVLink
from infercast.sim.speculative import SpeculativeConfig

if TYPE_CHECKING:
    from infercast.sim.config import DisaggConfig

SCHEDULERS = (
    "static | prefill-first (continuous batching, whole prompts first) | chunked (chunked prefill) | "
    "inflight (whole prompts beside the decodes, KV reserved for prompt + output) | "
    "disagg (prefill and decode pools); default: the engine's"
)
DEFAULT_SPEC_ACCEPTANCE = 0.7
"""--spec-acceptance when --spec-tokens is given without it (a typical EAGLE-style draft on chat traffic)."""
KV_LINK_DEFAULT_GBPS = KVLink().bandwidth_bytes_s / 1e9


def _length(value: str | None, field: str) -> int | str | None:
    """An integer, or a distribution spec such as lognormal:1000,0.6 (see sim.workload.LengthSpec)."""
    if value is None:
        return None
    digits = value.strip().lstrip("-")
    return int(value) if digits.isascii() and digits.isdigit() else value  # '²'.isdigit() is True, int('²') fails


@with_flags
def simulate(
    model: Annotated[str, typer.Option(help="Catalog id or config.json path.")] = "llama-3.1-8b",
    gpu: Annotated[str, typer.Option(help="Accelerator id or hardware YAML file.")] = "h100-sxm",
    tp: Annotated[int, typer.Option(help="Tensor-parallel GPUs per replica.")] = 1,
    ep: Annotated[int, typer.Option(help="Expert-parallel ways (MoE; must divide tp x attention-dp).")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline stages per replica (each tp x attention-dp GPUs).")] = 1,
    attention_dp: Annotated[
        int,
        typer.Option("--attention-dp", help="Attention data parallelism per stage (MoE wide EP; see predict)."),
    ] = 1,
    precision: Annotated[str | None, typer.Option(help="Weight/compute scheme (default: the model's).")] = None,
    kv_precision: Annotated[str | None, typer.Option(help=KV_HELP)] = None,
    engine: Annotated[
        str,
        typer.Option(
            help="Engine profile: vllm (vLLM 0.12), vllm-0.14, sglang (SGLang 0.5), trtllm (TensorRT-LLM 1.0), ideal."
        ),
    ] = "vllm",
    scheduler: Annotated[str | None, typer.Option(help=SCHEDULERS)] = None,
    input_len: Annotated[
        str | None,
        typer.Option(help="Prompt tokens: N or a distribution (uniform:a,b, normal:m,s, lognormal:median,sigma)."),
    ] = None,
    output_len: Annotated[str | None, typer.Option(help="Output tokens: N or a distribution.")] = None,
    trace: Annotated[
        str | None,
        typer.Option(
            help="Trace CSV (arrived_at,num_prefill_tokens,num_decode_tokens), "
            "Mooncake JSONL, or azure_conv / azure_code."
        ),
    ] = None,
    num_requests: Annotated[
        int | None,
        typer.Option(help="Requests to simulate (default 10 x --concurrency in a closed loop, else 1000; trace: all)."),
    ] = None,
    rate: Annotated[float | None, typer.Option(help="Request rate (req/s), open loop.")] = None,
    burstiness: Annotated[float, typer.Option(help="Gamma shape of inter-arrivals (1 = Poisson), as vLLM.")] = 1.0,
    concurrency: Annotated[int | None, typer.Option(help="Closed loop: N clients, each sends on completion.")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="All requests at t=0 (throughput test).")] = False,
    max_num_seqs: Annotated[int | None, typer.Option(help="Scheduler sequence limit.")] = None,
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option("--max-num-batched-tokens", "--max-batched-tokens", help="Tokens per step (token budget)."),
    ] = None,
    block_size: Annotated[int | None, typer.Option(help="Tokens per KV block.")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option(help="Memory fraction for the engine.")] = None,
    no_prefix_caching: Annotated[bool, typer.Option("--no-prefix-caching", help="Disable prefix caching.")] = False,
    prefix_len: Annotated[
        int | None, typer.Option(help="Shared system prompt tokens added to every prompt (0: none).")
    ] = None,
    num_prefixes: Annotated[int | None, typer.Option(help="Distinct shared system prompts (default 1).")] = None,
    preemption: Annotated[str, typer.Option(help="recompute | swap (PCIe cost) when KV blocks run out.")] = "recompute",
    overlap_scheduler: Annotated[
        bool | None,
        typer.Option(
            "--overlap-scheduler/--no-overlap-scheduler",
            help="The engine plans step k + 1 while step k runs: a request arriving mid-step joins the step "
            "after next (default: the engine preset's, off).",
        ),
    ] = None,
    stream_token_us: StreamTokenOption = None,
    replicas: Annotated[int, typer.Option(help="Replicas behind the router.")] = 1,
    router: Annotated[str, typer.Option(help="round_robin | least_outstanding | prefix_affinity")] = "round_robin",
    prefill_instances: Annotated[int | None, typer.Option(help="disagg: prefill replicas (default 1).")] = None,
    decode_instances: Annotated[int | None, typer.Option(help="disagg: decode replicas (default 1).")] = None,
    prefill_tp: Annotated[int | None, typer.Option(help="disagg: TP of prefill replicas (default --tp).")] = None,
    decode_tp: Annotated[int | None, typer.Option(help="disagg: TP of decode replicas (default --tp).")] = None,
    kv_link_gbps: Annotated[
        float | None,
        typer.Option(help=f"disagg: KV transfer bandwidth per GPU, GB/s (default {KV_LINK_DEFAULT_GBPS:g})."),
    ] = None,
    goodput: Annotated[str | None, typer.Option(help="SLOs in ms, e.g. --goodput ttft:200 tpot:50")] = None,
    spec_tokens: Annotated[int | None, typer.Option(help="Speculative decoding: draft tokens per step.")] = None,
    spec_acceptance: Annotated[
        float | None,
        typer.Option(help=f"Speculative decoding: per-token acceptance rate (default {DEFAULT_SPEC_ACCEPTANCE:g})."),
    ] = None,
    draft_model: Annotated[str | None, typer.Option(help="Speculative decoding: draft model id.")] = None,
    draft_cost: Annotated[
        float | None, typer.Option(help="Draft step / target decode step, without --draft-model (default 0.05).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed (arrivals, lengths).")] = 0,
    rate_sweep: Annotated[
        bool, typer.Option("--rate-sweep", help="Latency vs load; find the SLO capacity (highest rate meeting SLOs).")
    ] = False,
    rates: Annotated[
        str | None, typer.Option(help="--rate-sweep: comma-separated rates (default: around capacity).")
    ] = None,
    attainment: Annotated[
        float | None, typer.Option(help="--rate-sweep: share of requests that must meet the SLOs (default 0.9).")
    ] = None,
    requests_out: Annotated[Path | None, typer.Option(help="Write the per-request table (.csv or .parquet).")] = None,
    trace_out: Annotated[
        Path | None,
        typer.Option(
            help="Write a Perfetto/Chrome trace (.json or .json.gz); its request track holds the first 200 requests "
            "by arrival unless --trace-all."
        ),
    ] = None,
    trace_all: Annotated[
        bool,
        typer.Option("--trace-all", help="--trace-out: keep every request and every step in the trace (big files)."),
    ] = False,
    plot_dir: Annotated[Path | None, typer.Option(help="Write latency CDF and timeline plots here.")] = None,
    step_mode: Annotated[bool, typer.Option("--step-mode", help="Step token by token (slow; for checking).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    launch: LaunchOption = None,
    sensitivity: Annotated[bool, typer.Option("--sensitivity", help=SENSITIVITY_HELP)] = False,
    json_format: Annotated[
        str | None,
        typer.Option(help="JSON key names: infercast (default) or vllm (as `vllm bench serve --save-result`)."),
    ] = None,
) -> None:
    """Simulate serving under traffic; report vLLM-bench-style TTFT/TPOT/ITL/E2E, throughput and goodput."""
    given = locals()
    _check_outputs(requests_out, trace_out, plot_dir)
    if json_format is not None:
        if json_format.strip().lower() not in JSON_FORMATS:
            raise unknown_choice("json_format", json_format, JSON_FORMATS)
        json_format = json_format.strip().lower()
        if rate_sweep and json_format == "vllm":
            raise InfercastError(
                "vllm bench serve writes one run per file: use it without --rate-sweep", field="json_format"
            )
    engine_used, tp, kv_precision = apply_launch(launch, engine, tp, kv_precision, _engine_flags(given))
    disagg = _disagg(scheduler, given)
    speculative = _speculative(given)
    prefix = _prefix(prefix_len, num_prefixes)
    if not rate_sweep:
        _refuse(given, ("rates", "attainment"), "only applies with --rate-sweep")
    if trace_out is None:
        _refuse(given, ("trace_all",), "only applies with --trace-out")
    common = dict(
        tp=tp,
        ep=ep,
        pp=pp,
        attention_dp=attention_dp,
        precision=precision,
        kv_precision=kv_precision,
        engine=engine_used,
        scheduler=scheduler,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        block_size=block_size,
        gpu_memory_utilization=gpu_memory_utilization,
        prefix_caching=not no_prefix_caching,
        preemption=preemption,
        overlap_scheduler=overlap_scheduler,
        replicas=replicas,
        router=router,
        disagg=disagg,
        speculative=speculative,
        step_mode=step_mode,
        stream_token_s=stream_token_seconds(stream_token_us),
        trace=trace,
        input_len=_length(input_len, "input_len"),
        output_len=_length(output_len, "output_len"),
        num_requests=num_requests,
        burstiness=burstiness,
        seed=seed,
        prefix=prefix,
    )
    if rate_sweep:
        from infercast.sim.rate_sweep import rate_sweep as run_sweep

        _refuse(given, ("rate", "concurrency", "offline"), "not with --rate-sweep, which sets the load (see --rates)")
        _refuse(given, ("requests_out", "trace_out"), "not with --rate-sweep (one run per rate): simulate one --rate")
        rate_list = parse_float_list("rates", rates)
        sweep = run_sweep(
            model, gpu, rates=rate_list, goodput=goodput, attainment=0.9 if attainment is None else attainment, **common
        )
        if plot_dir:
            from infercast.sim.plots import plot_rate_sweep

            make_dir(plot_dir, "plot_dir")
            plot_rate_sweep(
                sweep.table, plot_dir / "rate_sweep.png", slo=sweep.slo, slo_capacity=sweep.slo_capacity_req_s
            )
            wrote(plot_dir / "rate_sweep.png")
        if json_out:
            emit_json(sweep.to_dict())
        else:
            _render_sweep(sweep)
        return
    from infercast.sim.api import config_from_keywords
    from infercast.sim.api import run as run_simulation

    config = config_from_keywords(
        model,
        gpu,
        rate=rate,
        concurrency=concurrency,
        offline=offline,
        goodput=goodput,
        trace_steps=(10**12 if trace_all else 200_000) if trace_out else 0,
        sample_interval=0.05 if (trace_out or plot_dir) else 1.0,
        **common,
    )
    result = run_simulation(config)
    _write_outputs(result, requests_out, trace_out, plot_dir, trace_all)
    if json_format == "vllm":
        emit_json(_vllm_json(result, rate=rate, burstiness=burstiness, concurrency=concurrency))
        return
    _emit(result, config, json_out, sensitivity)


SENSITIVITY_HELP = (
    "Also run with a KV pool 10 % smaller and larger and report the mean TTFT of each (on by itself when the run "
    "sits on a KV or batch-slot cliff)."
)


def _engine_flags(given: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """The engine fields simulate's own options set (field -> (value, flag)), for the settings block."""
    flags = (
        ("max_num_seqs", "max_num_seqs", "--max-num-seqs"),
        ("max_num_batched_tokens", "max_num_batched_tokens", "--max-num-batched-tokens"),
        ("block_size", "block_size", "--block-size"),
        ("kv_fraction", "gpu_memory_utilization", "--gpu-memory-utilization"),
    )
    return {field: (given[opt], f"{flag} {given[opt]}") for field, opt, flag in flags}


def _emit(result: Any, config: Any, json_out: bool, sensitivity: bool) -> None:
    """Print one run: JSON (with ``sensitivity`` and ``engine_settings``) or the summary table, the KV-pool
    sensitivity line and the engine settings block."""
    swing = None
    if sensitivity or result.cliff:
        from infercast.sim.sensitivity import kv_sensitivity

        swing = kv_sensitivity(config, float(result.summary.to_dict()["ttft_s"]["mean"]))
    if json_out:
        settings = engine_settings(config.deployment, config.engine.prefix_caching).to_dict()
        emit_json({**result.to_dict(), "sensitivity": swing, "engine_settings": settings})
        return
    from infercast.sim.export import summary_table

    console.print(summary_table(result))
    if swing:
        lo, hi = (swing[k] for k in ("ttft_s_kv_pool_minus_10pct", "ttft_s_kv_pool_plus_10pct"))
        shown = [("n/a" if v is None else f"{v:.3g} s") for v in (lo, hi)]
        console.print(f"Sensitivity: mean TTFT {swing['ttft_s']:.3g} s; KV pool -10 %: {shown[0]}, +10 %: {shown[1]}")
    print_settings(config.deployment, config.engine.prefix_caching)


JSON_FORMATS = ("infercast", "vllm")


def _write_outputs(
    result, requests_out: Path | None, trace_out: Path | None, plot_dir: Path | None, trace_all: bool
) -> None:
    """Write the files asked for, each with a 'wrote PATH' line; say what a trace leaves out and how to keep it."""
    if requests_out:
        from infercast.sim.export import write_requests

        write_requests(result, requests_out)
        wrote(requests_out, "per-request table")
    if trace_out:
        from infercast.sim.perfetto import DEFAULT_MAX_REQUESTS, trace_cuts, write_chrome_trace

        keep = None if trace_all else DEFAULT_MAX_REQUESTS
        write_chrome_trace(result, trace_out, max_requests=keep)
        wrote(trace_out, "open it at https://ui.perfetto.dev")
        for cut in trace_cuts(result, keep):
            err_console.print(f"note: {cut}; --trace-all keeps everything", markup=False, highlight=False)
    if plot_dir:
        from infercast.sim.plots import plot_latency_cdfs, plot_timeline

        make_dir(plot_dir, "plot_dir")
        for name, plot in (("latency_cdfs.png", plot_latency_cdfs), ("timeline.png", plot_timeline)):
            plot(result, plot_dir / name)
            wrote(plot_dir / name)


def _vllm_json(result, *, rate: float | None, burstiness: float, concurrency: int | None) -> dict:
    """The run under ``vllm bench serve --save-result`` key names (goodput filled in when SLOs were given)."""
    from infercast.records.bench_results import to_vllm_result

    doc = to_vllm_result(
        result,
        model_id=result.config["model"],
        max_concurrency=concurrency,
        request_rate=math.inf if rate is None else rate,
        burstiness=burstiness,
    )
    if "slo" in result.summary:
        doc["request_goodput"] = result["goodput_req_s"]
    return doc


def _check_outputs(requests_out: Path | None, trace_out: Path | None, plot_dir: Path | None) -> None:
    """Every output path is checked before the run, so a bad one never costs a run or leaves partial results."""
    if requests_out is not None:
        check_output_file(requests_out, "requests_out", (*CSV_SUFFIXES, *PARQUET_SUFFIXES), create_parents=True)
    if trace_out is not None:
        check_output_file(trace_out, "trace_out", (".json", ".json.gz"), create_parents=True)
    if plot_dir is not None:
        check_output_dir(plot_dir, "plot_dir")


def _refuse(given: dict, names: tuple[str, ...], why: str) -> None:
    """A usage error naming the first of ``names`` the user gave (options default to None, flags to False)."""
    for name in names:
        if given[name] is not None and given[name] is not False:
            raise InfercastError(why, field=name)


def _disagg(scheduler: str | None, given: dict) -> DisaggConfig | None:
    pools = ("prefill_instances", "decode_instances", "prefill_tp", "decode_tp", "kv_link_gbps")
    if scheduler is None or scheduler.strip().lower() != "disagg":
        _refuse(given, pools, "only applies with --scheduler disagg")
        return None
    gbps = given["kv_link_gbps"]
    link = KVLink() if gbps is None else KVLink(bandwidth_bytes_s=require_positive_number("kv_link_gbps", gbps) * 1e9)
    sizes = {k: given[k] for k in ("prefill_instances", "decode_instances") if given[k] is not None}
    from infercast.sim.config import DisaggConfig

    return DisaggConfig(**sizes, prefill_tp=given["prefill_tp"], decode_tp=given["decode_tp"], link=link)


def _speculative(given: dict) -> SpeculativeConfig | None:
    if given["spec_tokens"] is None:
        _refuse(given, ("spec_acceptance", "draft_model", "draft_cost"), "needs --spec-tokens K (speculative decoding)")
        return None
    if given["draft_model"] is not None and given["draft_cost"] is not None:
        raise InfercastError(
            "--draft-cost prices a draft without a model; with --draft-model the draft model's own step time is used",
            field="draft_cost",
        )
    acceptance = DEFAULT_SPEC_ACCEPTANCE if given["spec_acceptance"] is None else given["spec_acceptance"]
    extra = {} if given["draft_cost"] is None else {"draft_cost": given["draft_cost"]}
    return SpeculativeConfig(given["spec_tokens"], acceptance, given["draft_model"], **extra)


def _prefix(prefix_len: int | None, num_prefixes: int | None) -> tuple[int, int] | None:
    tokens = 0 if prefix_len is None else require_positive_int("prefix_len", prefix_len, minimum=0)
    if not tokens:
        if num_prefixes is not None:
            raise InfercastError("needs --prefix-len N (the shared prompt's tokens)", field="num_prefixes")
        return None
    from infercast.sim.workload.prefixes import prefix_sizes

    return prefix_sizes(1 if num_prefixes is None else num_prefixes, tokens, fields=("num_prefixes", "prefix_len"))


def _render_sweep(sweep) -> None:
    t = Table(title="Latency vs request rate" + (f" (SLO: {sweep.slo.describe()})" if sweep.slo else ""))
    for col in ("rate", "throughput", "goodput", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "saturated"):
        t.add_column(col, justify="right")
    for row in sweep.table.to_dict(orient="records"):
        t.add_row(
            f"{row['rate_req_s']:.2f}",
            f"{row['request_throughput_req_s']:.2f}",
            f"{row['goodput_req_s']:.2f}",
            fmt_time(row["ttft_p50_s"]),
            fmt_time(row["ttft_p99_s"]),
            fmt_time(row["tpot_p50_s"]),
            fmt_time(row["tpot_p99_s"]),
            "yes" if row["saturated"] else "",
        )
    console.print(t)
    if sweep.slo_capacity_req_s is None:
        console.print("[red]no rate met the SLOs[/]" if sweep.slo else "[red]no rate kept up with its load[/]")
    else:
        what = "SLO capacity (highest rate meeting the SLOs)" if sweep.slo else "highest rate kept up with"
        console.print(
            f"{what}: {sweep.slo_capacity_req_s:.2f} req/s "
            f"(offline throughput, all requests at once: {sweep.capacity_req_s:.2f} req/s)"
        )
