"""`infercast simulate`: replay traffic against a configuration; `--rate-sweep` for latency vs load."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from infercast.cli import simulate_opts as opt
from infercast.cli.common import (
    StreamTokenOption,
    console,
    emit_json,
    err_console,
    parse_float_list,
    stream_token_seconds,
    wrote,
)
from infercast.cli.flags import with_flags
from infercast.cli.launch_opts import (
    LaunchOption,
    apply_launch,
    engine_settings,
    launch_drafts,
    print_settings,
)
from infercast.display import fmt_time
from infercast.errors import InfercastError, require_positive_int, require_positive_number, unknown_choice
from infercast.files import check_output_dir, check_output_file, make_dir
from infercast.sim.export import CSV_SUFFIXES, PARQUET_SUFFIXES
from infercast.sim.kv_link import KVLink
from infercast.sim.speculative import SpeculativeConfig, mtp_draft_cost

if TYPE_CHECKING:
    from infercast.sim.api import SimulationResult
    from infercast.sim.config import DisaggConfig, ObserveConfig, SimulationConfig
    from infercast.sim.rate_sweep import RateSweep
    from infercast.sim.workload import WorkloadSpec


def _length(value: str | None, field: str) -> int | str | None:
    """An integer, or a distribution spec such as lognormal:1000,0.6 (see sim.workload.LengthSpec)."""
    if value is None:
        return None
    digits = value.strip().lstrip("-")
    return int(value) if digits.isascii() and digits.isdigit() else value  # '²'.isdigit() is True, int('²') fails


@dataclass(frozen=True)
class SimulateOutputs:
    """What `infercast simulate` writes and prints besides running: files, JSON or tables, the sensitivity runs."""

    requests_out: Path | None = None
    trace_out: Path | None = None
    plot_dir: Path | None = None
    trace_all: bool = False
    json_out: bool = False
    json_format: str | None = None
    """infercast | vllm (``vllm bench serve --save-result`` key names); None: infercast."""
    sensitivity: bool = False


@with_flags
def simulate(
    model: opt.Model = "llama-3.1-8b",
    gpu: opt.Gpu = "h100-sxm",
    tp: opt.Tp = 1,
    ep: opt.Ep = 1,
    pp: opt.Pp = 1,
    attention_dp: opt.AttentionDp = 1,
    precision: opt.Precision = None,
    kv_precision: opt.KvPrecision = None,
    engine: opt.Engine = "vllm",
    scheduler: opt.Scheduler = None,
    input_len: opt.InputLen = None,
    output_len: opt.OutputLen = None,
    trace: opt.Trace = None,
    num_requests: opt.NumRequests = None,
    rate: opt.Rate = None,
    burstiness: opt.Burstiness = 1.0,
    concurrency: opt.Concurrency = None,
    offline: opt.Offline = False,
    max_num_seqs: opt.MaxNumSeqs = None,
    max_num_batched_tokens: opt.MaxNumBatchedTokens = None,
    block_size: opt.BlockSize = None,
    gpu_memory_utilization: opt.GpuMemoryUtilization = None,
    no_prefix_caching: opt.NoPrefixCaching = False,
    prefix_len: opt.PrefixLen = None,
    num_prefixes: opt.NumPrefixes = None,
    preemption: opt.Preemption = "recompute",
    overlap_scheduler: opt.OverlapScheduler = None,
    stream_token_us: StreamTokenOption = None,
    replicas: opt.Replicas = 1,
    router: opt.RouterName = "round_robin",
    prefill_instances: opt.PrefillInstances = None,
    decode_instances: opt.DecodeInstances = None,
    prefill_tp: opt.PrefillTp = None,
    decode_tp: opt.DecodeTp = None,
    kv_link_gbps: opt.KvLinkGbps = None,
    goodput: opt.Goodput = None,
    spec_tokens: opt.SpecTokens = None,
    spec_acceptance: opt.SpecAcceptance = None,
    draft_model: opt.DraftModel = None,
    draft_cost: opt.DraftCost = None,
    seed: opt.Seed = 0,
    rate_sweep: opt.RateSweepFlag = False,
    rates: opt.Rates = None,
    attainment: opt.Attainment = None,
    requests_out: opt.RequestsOut = None,
    trace_out: opt.TraceOut = None,
    trace_all: opt.TraceAll = False,
    plot_dir: opt.PlotDir = None,
    step_mode: opt.StepMode = False,
    json_out: opt.JsonOut = False,
    launch: LaunchOption = None,
    sensitivity: opt.Sensitivity = False,
    json_format: opt.JsonFormat = None,
) -> None:
    """Simulate serving under traffic; report vLLM-bench-style TTFT/TPOT/ITL/E2E, throughput and goodput."""
    given = locals()
    outputs = _outputs(given)
    config = _config(given)
    if rate_sweep:
        _sweep(config, given, outputs)
    else:
        _run_once(config, given, outputs)


def _outputs(given: dict[str, Any]) -> SimulateOutputs:
    """The outputs asked for, every path checked before the run (a bad one never costs a run or leaves partial
    results)."""
    _check_outputs(given["requests_out"], given["trace_out"], given["plot_dir"])
    json_format = given["json_format"]
    if json_format is not None:
        if json_format.strip().lower() not in opt.JSON_FORMATS:
            raise unknown_choice("json_format", json_format, opt.JSON_FORMATS)
        json_format = json_format.strip().lower()
        if given["rate_sweep"] and json_format == "vllm":
            raise InfercastError(
                "vllm bench serve writes one run per file: use it without --rate-sweep", field="json_format"
            )
    files = {k: given[k] for k in ("requests_out", "trace_out", "plot_dir", "trace_all", "json_out")}
    return SimulateOutputs(**files, json_format=json_format, sensitivity=given["sensitivity"])


def _config(given: dict[str, Any]) -> SimulationConfig:
    """The run's typed configuration, built from the options (a rate sweep's at rate = inf: it sets the load)."""
    from infercast.sim.api import simulation_config
    from infercast.sim.config import ClusterConfig, EngineConfig, ObserveConfig, split_scheduler
    from infercast.specs.deployment import Deployment

    engine, tp, kv_precision, (ep, attention_dp) = apply_launch(
        given["launch"],
        given["engine"],
        given["tp"],
        given["kv_precision"],
        _engine_flags(given),
        layout=(given["ep"], given["attention_dp"]),
    )
    disagg = _disagg(given["scheduler"], given)
    prefix = _prefix(given["prefix_len"], given["num_prefixes"])
    _check_mode(given)
    stream_token_s = stream_token_seconds(given["stream_token_us"])
    workload = _workload(given, prefix)
    sched, disagg = split_scheduler(given["scheduler"], disagg)
    layout = {"ep": ep, "attention_dp": attention_dp, "precision": given["precision"], "pp": given["pp"]}
    dep = Deployment.resolve(given["model"], given["gpu"], tp=tp, kv_precision=kv_precision, engine=engine, **layout)
    speculative = _speculative(_with_launch_drafts(given, dep.model.num_layers))
    knobs = EngineConfig(
        sched,
        **{k: given[k] for k in ("max_num_seqs", "max_num_batched_tokens", "block_size", "gpu_memory_utilization")},
        prefix_caching=not given["no_prefix_caching"],
        preemption=given["preemption"],
        speculative=speculative,
        overlap_scheduler=given["overlap_scheduler"],
    )
    cluster = ClusterConfig(given["replicas"], given["router"], disagg)
    observe = ObserveConfig() if given["rate_sweep"] else _observe(given)
    return simulation_config(
        dep, workload, knobs, cluster, observe, stream_token_s=stream_token_s, step_mode=given["step_mode"]
    )


def _workload(given: dict[str, Any], prefix: tuple[int, int] | None) -> WorkloadSpec:
    """The requests: a rate sweep's at rate = inf (all at once: its capacity run), retimed to each rate."""
    from infercast.sim.workload import WorkloadSpec

    load = dict(rate=math.inf) if given["rate_sweep"] else {k: given[k] for k in ("rate", "concurrency", "offline")}
    return WorkloadSpec(
        trace=given["trace"],
        input_len=_length(given["input_len"], "input_len"),
        output_len=_length(given["output_len"], "output_len"),
        num_requests=given["num_requests"],
        burstiness=given["burstiness"],
        seed=given["seed"],
        prefix=prefix,
        **load,
    )


def _observe(given: dict[str, Any]) -> ObserveConfig:
    """SLOs, and the step trace and occupancy samples that ``--trace-out`` and ``--plot-dir`` draw."""
    from infercast.sim.config import ObserveConfig

    trace_steps = (10**12 if given["trace_all"] else 200_000) if given["trace_out"] else 0
    return ObserveConfig(given["goodput"], trace_steps, 0.05 if (given["trace_out"] or given["plot_dir"]) else 1.0)


def _check_mode(given: dict[str, Any]) -> None:
    """Options of one mode given in the other: a rate sweep's without it, a single run's (the load, per-request
    files) with it."""
    if not given["rate_sweep"]:
        _refuse(given, ("rates", "attainment"), "only applies with --rate-sweep")
    if given["trace_out"] is None:
        _refuse(given, ("trace_all",), "only applies with --trace-out")
    if given["rate_sweep"]:
        _refuse(given, ("rate", "concurrency", "offline"), "not with --rate-sweep, which sets the load (see --rates)")
        _refuse(given, ("requests_out", "trace_out"), "not with --rate-sweep (one run per rate): simulate one --rate")


def _sweep(config: SimulationConfig, given: dict[str, Any], outputs: SimulateOutputs) -> None:
    """``--rate-sweep``: latency against load and the SLO capacity, as a table or JSON, and its plot."""
    from infercast.sim.rate_sweep import rate_sweep as run_sweep

    rate_list = parse_float_list("rates", given["rates"])
    attainment = 0.9 if given["attainment"] is None else given["attainment"]
    sweep = run_sweep(config, rates=rate_list, goodput=given["goodput"], attainment=attainment)
    if outputs.plot_dir:
        from infercast.sim.plots import plot_rate_sweep

        make_dir(outputs.plot_dir, "plot_dir")
        path = outputs.plot_dir / "rate_sweep.png"
        plot_rate_sweep(sweep.table, path, slo=sweep.slo, slo_capacity=sweep.slo_capacity_req_s)
        wrote(path)
    if outputs.json_out:
        emit_json(sweep.to_dict())
    else:
        _render_sweep(sweep)


def _run_once(config: SimulationConfig, given: dict[str, Any], outputs: SimulateOutputs) -> None:
    """One run: its files, then its report (``vllm bench serve`` JSON, infercast JSON or tables)."""
    from infercast.sim.api import run as run_simulation

    result = run_simulation(config)
    _write_outputs(result, outputs.requests_out, outputs.trace_out, outputs.plot_dir, outputs.trace_all)
    if outputs.json_format == "vllm":
        load = {k: given[k] for k in ("rate", "burstiness", "concurrency")}
        emit_json(_vllm_json(result, **load))
        return
    _emit(result, config, outputs.json_out, outputs.sensitivity)


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
    """Print one run: JSON (with ``sensitivity`` and ``engine_settings``) or the summary table, the sensitivity
    line (KV pool and step time +-10 %) and the engine settings block."""
    swing = None
    if sensitivity or result.cliff:
        from infercast.sim.sensitivity import ttft_sensitivity

        swing = ttft_sensitivity(config, float(result.summary.to_dict()["ttft_s"]["mean"]))
    if json_out:
        settings = engine_settings(config.deployment, config.engine.prefix_caching).to_dict()
        emit_json({**result.to_dict(), "sensitivity": swing, "engine_settings": settings})
        return
    from infercast.sim.export import summary_table

    console.print(summary_table(result))
    if swing:
        console.print(_sensitivity_line(swing))
    print_settings(config.deployment, config.engine.prefix_caching)


def _sensitivity_line(swing: dict[str, float | None]) -> str:
    """``Sensitivity: mean TTFT 1.2 s; KV pool -10 %: 3.4 s, +10 %: 0.9 s; step time -10 %: ..., +10 %: ...``."""

    def shown(key: str) -> str:
        value = swing[key]
        return "n/a" if value is None else f"{value:.3g} s"

    kv = f"KV pool -10 %: {shown('ttft_s_kv_pool_minus_10pct')}, +10 %: {shown('ttft_s_kv_pool_plus_10pct')}"
    step = f"step time -10 %: {shown('ttft_s_step_time_minus_10pct')}, +10 %: {shown('ttft_s_step_time_plus_10pct')}"
    return f"Sensitivity: mean TTFT {shown('ttft_s')}; {kv}; {step}"


def _write_outputs(
    result: SimulationResult, requests_out: Path | None, trace_out: Path | None, plot_dir: Path | None, trace_all: bool
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


def _vllm_json(result: SimulationResult, *, rate: float | None, burstiness: float, concurrency: int | None) -> dict:
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


def _with_launch_drafts(given: dict, num_layers: int) -> dict:
    """The options with the launch's speculative decoding where --spec-tokens is not given; an MTP launch's drafts
    each cost one of the model's layers unless --draft-cost / --draft-model say otherwise."""
    drafts = launch_drafts(given["launch"]) if given["spec_tokens"] is None else None
    if drafts is None:
        return given
    tokens, mtp = drafts
    out = {**given, "spec_tokens": tokens}
    cost = ""
    if mtp and given["draft_cost"] is None and given["draft_model"] is None:
        out["draft_cost"] = mtp_draft_cost(num_layers)
        cost = f", each draft one MTP layer (1/{num_layers} of a decode step)"
    acceptance = opt.DEFAULT_SPEC_ACCEPTANCE if given["spec_acceptance"] is None else given["spec_acceptance"]
    default = " (default; --spec-acceptance sets it)" if given["spec_acceptance"] is None else ""
    err_console.print(
        f"note: launch: speculative decoding with {tokens} draft tokens per step{cost}, acceptance {acceptance:g}"
        f"{default}"
    )
    return out


def _speculative(given: dict) -> SpeculativeConfig | None:
    if given["spec_tokens"] is None:
        _refuse(given, ("spec_acceptance", "draft_model", "draft_cost"), "needs --spec-tokens K (speculative decoding)")
        return None
    if given["draft_model"] is not None and given["draft_cost"] is not None:
        raise InfercastError(
            "--draft-cost prices a draft without a model; with --draft-model the draft model's own step time is used",
            field="draft_cost",
        )
    acceptance = opt.DEFAULT_SPEC_ACCEPTANCE if given["spec_acceptance"] is None else given["spec_acceptance"]
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


def _render_sweep(sweep: RateSweep) -> None:
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
