"""``infercast calibrate-cpu`` and ``infercast validate-sim``: the real engine on this machine's CPU, and the
simulator checked against it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from infercast.cli.common import JSON_HELP, console, emit_json, err_console, require_torch
from infercast.errors import InfercastError, require_positive_int, require_positive_number

if TYPE_CHECKING:
    from infercast.harness.engine.sim_agreement import Validation
    from infercast.harness.engine.sim_twin import HarnessEngineConfig
    from infercast.sim.workload import Workload

CALIBRATION_DEFAULT = "infercast-profiles/cpu.yaml"
MAX_ROUNDS = 50
"""Most calibration rounds (each serves the calibration workloads again, seconds to minutes on a CPU); the default
is 2 and more than a handful changes the fit little."""
MAX_THREADS = 4096
"""Most torch threads (past any CPU's cores; torch itself overflows past a C int)."""
MAX_REPEATS = 100
"""Most timed repeats per step shape (the median is kept; the default is 3)."""


@dataclass(frozen=True)
class CpuEngineFlags:
    """The CPU engine a command builds (``calibrate-cpu``, ``validate-sim``, ``serve``): the model cut to its first
    ``layers`` layers, its number format, and the scheduler and KV pool it runs with."""

    model: str
    layers: int | None
    precision: str
    scheduler: str = "chunked"
    num_blocks: int = 256
    block_size: int = 16
    max_num_seqs: int = 16
    max_batched_tokens: int = 256
    prefix_caching: bool = True

    def config(self) -> HarnessEngineConfig:
        """The engine's configuration (bf16 or fp32; ``layers`` within the model's)."""
        from infercast.harness.engine.sim_twin import HarnessEngineConfig
        from infercast.sim.scheduler import scheduler_name
        from infercast.specs.catalog import get_model

        if self.precision not in ("bf16", "fp32"):
            raise InfercastError(f"must be bf16 or fp32 on the CPU engine, got {self.precision!r}", field="precision")
        spec = get_model(self.model)
        layers = self.layers
        if layers is not None and not 1 <= layers <= spec.num_layers:
            raise InfercastError(f"must be between 1 and {spec.num_layers} for {spec.id}, got {layers}", field="layers")
        return HarnessEngineConfig(
            spec,
            num_layers=layers,
            precision=self.precision,
            scheduler=scheduler_name(self.scheduler),
            num_blocks=self.num_blocks,
            block_size=self.block_size,
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_batched_tokens,
            prefix_caching=self.prefix_caching,
        )


@dataclass(frozen=True)
class CpuLoadFlags:
    """The requests ``validate-sim`` serves on the engine and simulates: lengths (or a trace), shared prefixes,
    and one load (an open-loop rate or closed-loop clients)."""

    input_len: str
    output_len: str
    num_requests: int
    rate: float | None
    burstiness: float
    concurrency: int | None
    trace: str | None
    prefix_tokens: int
    num_prefixes: int
    seed: int

    def workload(self) -> Workload:
        """The workload (a trace replaces the lengths; without a load, a one-line error)."""
        from infercast.sim.workload import WorkloadSpec

        if self.rate is None and self.concurrency is None:
            raise InfercastError("choose a load: --rate R or --concurrency C", field="rate")
        return WorkloadSpec(
            trace=self.trace,
            input_len=None if self.trace else self.input_len,
            output_len=None if self.trace else self.output_len,
            num_requests=self.num_requests,
            rate=self.rate,
            burstiness=self.burstiness if self.rate is not None else 1.0,
            concurrency=self.concurrency,
            seed=self.seed,
            prefix=(self.num_prefixes, self.prefix_tokens) if self.prefix_tokens else None,
        ).build()


ModelOpt = Annotated[str, typer.Option(help="Catalog id or config.json path (random weights, real shapes).")]
LayersOpt = Annotated[int | None, typer.Option(help="Build only the first N layers (default: all).")]
PrecisionOpt = Annotated[str, typer.Option(help="bf16 or fp32.")]
ThreadsOpt = Annotated[int, typer.Option(help="torch threads (torch.set_num_threads).")]


def _threads(threads: int) -> int:
    threads = require_positive_int("threads", threads)
    if threads > MAX_THREADS:
        raise InfercastError(f"{threads} is more than the limit of {MAX_THREADS}", field="threads")
    return threads


def calibrate_cpu(
    model: ModelOpt = "qwen3-0.6b",
    layers: LayersOpt = 2,
    precision: PrecisionOpt = "bf16",
    threads: ThreadsOpt = 1,
    repeats: Annotated[int, typer.Option(help="Timed repeats per step shape (median kept).")] = 3,
    rounds: Annotated[
        int, typer.Option(help="Rounds of calibration workloads served by the engine (>= 2: one is held out).")
    ] = 2,
    out: Annotated[Path, typer.Option(help="Where to write the calibration YAML.")] = Path(CALIBRATION_DEFAULT),
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Measure this CPU's GEMM and copy peaks, serve calibration workloads on the engine, fit a cost profile to
    its steps (scored on a round held out)."""
    require_torch("calibrate-cpu")
    from infercast.harness.engine.cpu import save_calibration
    from infercast.harness.engine.cpu_steps import calibrate
    from infercast.harness.engine.sim_agreement import build_model

    threads = _threads(threads)
    repeats = require_positive_int("repeats", repeats)
    rounds = require_positive_int("rounds", rounds)
    for name, value, limit in (("repeats", repeats, MAX_REPEATS), ("rounds", rounds, MAX_ROUNDS)):
        if value > limit:  # each round serves the calibration workloads again: a huge count ran for hours
            raise InfercastError(f"{value} is more than the limit of {limit}", field=name)
    config = CpuEngineFlags(model, layers, precision).config()
    _, profile, peaks, fit = calibrate(build_model(config), config, threads=threads, repeats=repeats, rounds=rounds)
    path = save_calibration(out, peaks, profile, fit)
    summary = {
        "file": str(path),
        "peaks": peaks,
        "profile": profile.flat(),
        "fit_mean_abs_rel_error": fit["mean_abs_rel_error"],
        "fit_max_abs_rel_error": fit["max_abs_rel_error"],
    }
    if json_out:
        emit_json(summary)
        return
    console.print(
        f"[bold]cpu[/]: {peaks['fp32'] / 1e9:.1f} GFLOP/s fp32, {peaks['bf16'] / 1e9:.1f} GFLOP/s bf16, "
        f"{peaks['bandwidth_bytes_s'] / 1e9:.1f} GB/s copy ({threads} threads, load average "
        f"{peaks['loadavg']})"
    )
    held = fit.get("held_out") or {}
    console.print(
        f"step fit over {fit['points']} served steps: mean |error| {fit['mean_abs_rel_error']:.1%}, "
        f"max {fit['max_abs_rel_error']:.1%}, summed time {fit['total_rel_error']:+.1%}; on rounds held "
        f"out: mean {held.get('mean_abs_rel_error', float('nan')):.1%}, summed time "
        f"{held.get('total_rel_error', float('nan')):+.1%}; wrote {path}"
    )


def validate_sim(
    model: ModelOpt = "qwen3-0.6b",
    layers: LayersOpt = 2,
    precision: PrecisionOpt = "bf16",
    scheduler: Annotated[str, typer.Option(help="static | prefill-first | chunked | inflight")] = "chunked",
    calibration: Annotated[
        Path | None, typer.Option(help=f"CPU calibration YAML (calibrate-cpu; default {CALIBRATION_DEFAULT}).")
    ] = None,
    threads: ThreadsOpt = 1,
    input_len: Annotated[str, typer.Option(help="Prompt tokens: N or a distribution (uniform:a,b ...).")] = "128",
    output_len: Annotated[str, typer.Option(help="Output tokens: N or a distribution.")] = "32",
    num_requests: Annotated[int, typer.Option(help="Requests to run.")] = 40,
    rate: Annotated[float | None, typer.Option(help="Request rate (req/s), open loop.")] = None,
    burstiness: Annotated[float, typer.Option(help="Gamma shape of inter-arrivals (1 = Poisson).")] = 1.0,
    concurrency: Annotated[int | None, typer.Option(help="Closed loop: N clients, each sends on completion.")] = None,
    trace: Annotated[str | None, typer.Option(help="A trace CSV/JSONL or built-in name (replaces lengths).")] = None,
    prefix_tokens: Annotated[int, typer.Option(help="Shared system prompt tokens (0: none).")] = 0,
    num_prefixes: Annotated[int, typer.Option(help="Distinct shared system prompts.")] = 1,
    num_blocks: Annotated[int, typer.Option(help="KV blocks of the engine's pool.")] = 256,
    block_size: Annotated[int, typer.Option(help="Tokens per KV block.")] = 16,
    max_num_seqs: Annotated[int, typer.Option(help="Scheduler sequence limit.")] = 16,
    max_batched_tokens: Annotated[int, typer.Option(help="Tokens per step.")] = 256,
    no_prefix_caching: Annotated[bool, typer.Option("--no-prefix-caching", help="Disable prefix caching.")] = False,
    seed: Annotated[int, typer.Option(help="Random seed (arrivals, lengths, prompts).")] = 0,
    no_probe: Annotated[
        bool, typer.Option("--no-probe", help="Do not rescale step times by a speed probe (served steps) run first.")
    ] = False,
    plot: Annotated[Path | None, typer.Option(help="Write the latency CDFs (PNG) here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Run a workload on the real engine (wall clock) and in the simulator; print both and their errors."""
    require_torch("validate-sim")
    threads = _threads(threads)
    if rate is not None:
        rate = require_positive_number("rate", rate)
    engine = CpuEngineFlags(
        model,
        layers,
        precision,
        scheduler=scheduler,
        num_blocks=num_blocks,
        block_size=block_size,
        max_num_seqs=max_num_seqs,
        max_batched_tokens=max_batched_tokens,
        prefix_caching=not no_prefix_caching,
    )
    load = CpuLoadFlags(
        input_len=input_len,
        output_len=output_len,
        num_requests=num_requests,
        rate=rate,
        burstiness=burstiness,
        concurrency=concurrency,
        trace=trace,
        prefix_tokens=prefix_tokens,
        num_prefixes=num_prefixes,
        seed=seed,
    )
    _validate_sim(engine, load, calibration or Path(CALIBRATION_DEFAULT), threads, not no_probe, plot, json_out)


def _validate_sim(
    engine: CpuEngineFlags,
    load: CpuLoadFlags,
    path: Path,
    threads: int,
    probe: bool,
    plot: Path | None,
    json_out: bool,
) -> None:
    """``validate-sim`` once its flags are read: serve ``load`` on the engine and simulate it, then report."""
    from infercast.harness.engine.cpu import load_calibration
    from infercast.harness.engine.sim_agreement import build_model, plot_cdfs
    from infercast.harness.engine.sim_agreement import validate_sim as run_validation

    if not path.is_file():
        raise InfercastError(
            f"no CPU calibration at {path}: run `infercast calibrate-cpu` first (same --model, "
            "--layers, --precision, --threads)",
            field="calibration",
        )
    hardware, profile, fit = load_calibration(path)
    config = engine.config()
    calibrated = (fit.get("model"), fit.get("layers"), fit.get("precision"), fit.get("threads"))
    now = (config.model_cut.id, config.num_layers, config.precision, threads)
    if calibrated != now:
        err_console.print(
            f"[yellow]note[/] {path} was calibrated with (model, layers, precision, threads) = "
            f"{calibrated}; this run uses {now}"
        )
    work = load.workload()
    result = run_validation(
        build_model(config, seed=load.seed), config, hardware, profile, work, threads=threads, probe=probe
    )
    if plot is not None:
        plot_cdfs({config.scheduler: result}, plot)
    if json_out:
        emit_json({**result.to_dict(), "calibration": str(path)})
        return
    _print_validation(result, config, work, path)
    if plot is not None:
        err_console.print(f"wrote {plot}")


def _print_validation(result: Validation, config: HarnessEngineConfig, work: Workload, path: Path) -> None:
    """validate-sim's table (measured, simulated, error per metric) and the run's load and speed notes."""
    table = Table(
        title=f"engine vs simulator: {config.model_cut.id}, {config.scheduler}, {len(work)} requests "
        f"({work.name}); calibration {path}"
    )
    for col in ("metric", "measured", "simulated", "error"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for row in result.rows:
        ms = row["metric"] in ("ttft_s", "tpot_s", "itl_s", "e2e_s")
        name = f"{row['metric'].removesuffix('_s')} {row['stat']} (ms)" if ms else row["metric"]
        k = 1e3 if ms else 1.0
        table.add_row(name, f"{row['measured'] * k:.4g}", f"{row['simulated'] * k:.4g}", f"{row['rel_error']:+.1%}")
    console.print(table)
    info = result.info
    console.print(
        f"load average {info['loadavg_before'][0]:.2f} -> {info['loadavg_after'][0]:.2f}; speed probe "
        f"{info['speed_factor']:.2f}x the calibration; engine steps took {info['step_time_ratio_sum']:.2f}x "
        "the (probe-scaled) step times in sum"
    )


def serve(
    model: ModelOpt = "qwen3-0.6b",
    layers: LayersOpt = 2,
    precision: PrecisionOpt = "bf16",
    scheduler: Annotated[str, typer.Option(help="static | prefill-first | chunked | inflight")] = "chunked",
    threads: ThreadsOpt = 1,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free port).")] = 8000,
    num_blocks: Annotated[int, typer.Option(help="KV blocks of the engine's pool.")] = 256,
    block_size: Annotated[int, typer.Option(help="Tokens per KV block.")] = 16,
    max_num_seqs: Annotated[int, typer.Option(help="Scheduler sequence limit.")] = 16,
    max_batched_tokens: Annotated[int, typer.Option(help="Tokens per step.")] = 256,
    no_prefix_caching: Annotated[bool, typer.Option("--no-prefix-caching", help="Disable prefix caching.")] = False,
) -> None:
    """Serve the engine over an OpenAI-compatible HTTP API (POST /v1/completions, streaming; GET /v1/models)."""
    require_torch("serve")
    import torch

    from infercast.harness.engine.server import EngineServer
    from infercast.harness.engine.sim_agreement import build_model, make_engine

    threads = _threads(threads)
    if not 0 <= port <= 65535:
        raise InfercastError(f"must be between 0 and 65535, got {port}", field="port")
    config = CpuEngineFlags(
        model,
        layers,
        precision,
        scheduler=scheduler,
        num_blocks=num_blocks,
        block_size=block_size,
        max_num_seqs=max_num_seqs,
        max_batched_tokens=max_batched_tokens,
        prefix_caching=not no_prefix_caching,
    ).config()
    torch.set_num_threads(threads)
    try:
        server = EngineServer(
            make_engine(build_model(config), config), host=host, port=port, model_name=config.model_cut.id
        )
    except OSError as exc:
        raise InfercastError(f"cannot listen on {host}:{port} ({exc.strerror})", field="port") from None
    server.start()
    where = f"http://{host}:{server.port}/v1"
    err_console.print(f"serving {config.model_cut.id} ({config.scheduler}) on {where}; Ctrl-C stops")
    try:
        while not server.stopped.is_set():
            server.stopped.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    if server.error is not None:
        raise InfercastError(f"the engine stopped: {server.error}", field="engine")
