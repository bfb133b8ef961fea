"""`infercast calibrate` and `infercast validate`: fit the cost model to measurements, and check it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
from rich.markup import escape
from rich.table import Table

from infercast.cli.common import JSON_HELP, console, emit_json, err_console
from infercast.cli.launch_opts import LaunchOption, launched_records, read_validate_launch, record_settings
from infercast.display import fmt_time
from infercast.errors import InfercastError
from infercast.records.bench_results import FORMATS, RunFacts, load_bench_records
from infercast.records.readers import load_records, measurement_files
from infercast.records.record import GROUP_FIELDS, Record

if TYPE_CHECKING:
    from infercast.calibrate.profile_fit import FitResult
    from infercast.specs.engine_launch import EngineLaunch

PROJECT_DATA = Path(__file__).resolve().parents[3] / "data" / "measurements"
"""The repository's measurement files (present in a source checkout, absent from an installed package)."""
DEFAULT_OUT = Path("infercast-profiles")


DataOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--data",
        help="Measurement CSV files or folders (repeatable): infercast record CSVs, or closed-loop "
        "benchmark rows in aiconfigurator's silicon format (ttft_ms_mean, tpot_ms_mean, ...).",
    ),
]
BenchOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--bench",
        help="Benchmark result file (repeatable): vllm bench serve --save-result JSON, a GuideLLM JSON report, or an "
        "AIPerf profile_export_aiperf.json/.csv. Each load point gives mean TTFT, median TPOT (vLLM's definition; "
        "GuideLLM/AIPerf call it ITL) and output throughput.",
    ),
]
BenchFormatOpt = Annotated[str, typer.Option("--bench-format", help=f"Format of --bench files: {', '.join(FORMATS)}.")]
ModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        help="--bench: model served (catalog id or config.json), when the file names none or one not in the catalog.",
    ),
]
TpOpt = Annotated[int | None, typer.Option("--tp", help="--bench: tensor-parallel GPUs of the served replica.")]
EpOpt = Annotated[int | None, typer.Option("--ep", help="--bench: expert-parallel ways (default: the file's, else 1).")]
PrecisionOpt = Annotated[str, typer.Option("--precision", help="--bench: weight scheme (default: the model's).")]
EngineOpt = Annotated[str, typer.Option("--engine", help="--bench: engine that served (vllm, sglang, trtllm).")]
ConcurrencyOpt = Annotated[
    int | None, typer.Option("--concurrency", help="--bench: closed-loop clients, for files that do not record it.")
]
RateOpt = Annotated[
    float | None, typer.Option("--request-rate", help="--bench: request rate (req/s), for files that do not record it.")
]


@dataclass(frozen=True)
class MeasurementSources:
    """The measurements ``calibrate`` and ``validate`` read: ``--data`` CSVs and ``--bench`` result files, with
    what the caller says about the benchmark runs that the files do not record."""

    data: tuple[Path, ...]
    bench: tuple[Path, ...]
    bench_format: str
    facts: RunFacts

    def records(self, what: str) -> tuple[list[Record], list[Path]]:
        """Records of the --data CSVs and the --bench result files (at least one of the two), and the CSVs read."""
        if not self.data and not self.bench:
            raise InfercastError("give --data CSV|DIR or --bench RESULT_FILE (or both)", field="data")
        files = measurement_files(self.data) if self.data else []
        records = _without_cpu(load_records(files), what) if files else []
        if self.bench:
            records += load_bench_records(list(self.bench), self.facts, self.bench_format)
        return records, files


def _without_cpu(records: list[Record], what: str) -> list[Record]:
    """Drop rows measured on the CPU (plumbing checks), saying so; refuse when nothing is left."""
    from infercast.calibrate.profile_fit import CPU_LABEL

    kept = [r for r in records if r.gpu.strip().lower() != CPU_LABEL]
    dropped = len(records) - len(kept)
    if dropped and not kept:
        raise InfercastError(
            f"all {dropped} rows were measured on the CPU (gpu 'cpu'): they test the harness and say nothing about "
            f"a GPU, so there is nothing to {what}",
            field="data",
        )
    if dropped:
        err_console.print(f"[yellow]note[/] left out {dropped} rows measured on the CPU (gpu 'cpu')")
    return kept


FromOpt = Annotated[
    str | None,
    typer.Option(
        "--from",
        help="Import measured kernel tables instead of fitting measurements: 'aiconfigurator' (the installed "
        "aiconfigurator-core, extra \\[aiconfigurator]) or 'aiconfigurator:PATH' (an unpacked wheel). Writes "
        "kernels/<gpu>.yaml profiles (GEMM, attention, fused-MoE and gated-DeltaNet fits, collective latency curves) "
        "for --gpu or every GPU.",
    ),
]
GpusOpt = Annotated[
    list[str] | None,
    typer.Option("--gpu", help="Only these GPUs (repeatable); with --bench, the one GPU the benchmark ran on."),
]
OutOpt = Annotated[
    Path | None, typer.Option(help=f"Folder for the fitted <gpu>.yaml profiles (default: ./{DEFAULT_OUT}/).")
]
InstallOpt = Annotated[
    bool,
    typer.Option(
        "--install",
        help="Write the profiles into the installed package (cost/profiles/), replacing the fitted profiles "
        "that predictions use. Without it nothing installed changes.",
    ),
]
ProjectDataOpt = Annotated[
    bool,
    typer.Option(
        "--project-data/--no-project-data",
        help="Fit jointly with the repository's data/measurements/ (when present, i.e. from a source "
        "checkout), so the new points refine the published fit instead of replacing it.",
    ),
]
FewPointsOpt = Annotated[
    bool,
    typer.Option(
        "--allow-few-points", help="Write profiles even where a GPU or engine has no more points than parameters."
    ),
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Fit and report; write nothing.")]
JsonOpt = Annotated[bool, typer.Option("--json", help=JSON_HELP)]


@dataclass(frozen=True)
class CalibrateOptions:
    """How ``calibrate`` fits and what it writes: the GPUs, where the profiles go, and its safety switches."""

    gpus: tuple[str, ...]
    out: Path | None
    install: bool
    project_data: bool
    allow_few_points: bool
    dry_run: bool

    def folder(self) -> Path:
        """Where the <gpu>.yaml profiles go: the package's profiles with --install, else --out or the default."""
        from infercast.calibrate.profile_fit import PROFILE_DIR

        return PROFILE_DIR if self.install else (self.out or DEFAULT_OUT)


def calibrate(
    data: DataOpt = None,
    from_source: FromOpt = None,
    bench: BenchOpt = None,
    gpu: GpusOpt = None,
    out: OutOpt = None,
    install: InstallOpt = False,
    project_data: ProjectDataOpt = True,
    allow_few_points: FewPointsOpt = False,
    dry_run: DryRunOpt = False,
    bench_format: BenchFormatOpt = "auto",
    model: ModelOpt = "",
    tp: TpOpt = None,
    ep: EpOpt = None,
    precision: PrecisionOpt = "",
    engine: EngineOpt = "",
    concurrency: ConcurrencyOpt = None,
    request_rate: RateOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Fit the parameters your measurements cover (their GPU's kernels, their engine's overheads) and write a
    profile per GPU.

    Profiles go to ./infercast-profiles/<gpu>.yaml (or --out), or into the package with --install. Use one with
    `infercast --profile FILE <command>` (any command); from Python, use_profile_file(path) from
    infercast.cost.profile. Values the fit pushed onto a bound are flagged.
    """
    if install and out is not None:
        raise InfercastError("give --out FOLDER or --install, not both", field="out")
    if from_source is not None:
        if data or bench:
            raise InfercastError("give --from or --data/--bench, not both", field="from")
        from infercast.cli.kernel_calibration import calibrate_kernels

        calibrate_kernels(from_source, gpu, out, install, dry_run, json_out)
        return
    if bench and gpu and len(gpu) > 1:
        raise InfercastError("with --bench give the one GPU the benchmark ran on (a single --gpu)", field="gpu")
    facts = RunFacts(model, (gpu or [""])[0], tp, ep, precision, engine, concurrency, request_rate)
    sources = MeasurementSources(tuple(data or ()), tuple(bench or ()), bench_format, facts)
    opts = CalibrateOptions(tuple(gpu or ()), out, install, project_data, allow_few_points, dry_run)
    _calibrate(sources, opts, json_out)


def _calibrate(sources: MeasurementSources, opts: CalibrateOptions, json_out: bool) -> None:
    """``calibrate`` once its flags are read: fit what the measurements cover, write the profiles, report."""
    from infercast.calibrate.profile_fit import covered_parameters, fit, write_gpu_profile

    gpu = list(opts.gpus)
    new, new_files = sources.records("calibrate")
    targets = sorted({r.gpu for r in new if not gpu or r.gpu in gpu})
    if not targets:
        raise InfercastError(f"no rows for gpu {', '.join(gpu)} in the given data", field="gpu")
    records, files = _with_project_data(new, new_files, list(sources.bench), opts.project_data)
    # only what the given data cover is fitted: the project's points inform it, its other engines stay as they are
    covered = covered_parameters(records, new)
    result = fit(records, gpus=gpu or None, parameters=covered, source=", ".join(str(f) for f in files))
    if not result.converged:
        err_console.print(f"[yellow]warning[/] the least-squares fit did not converge: {result.message}")
    few = result.underdetermined(targets)
    if few and not opts.allow_few_points and not opts.dry_run:
        raise InfercastError(
            f"too few points for the parameters fitted ({'; '.join(few)}): add measurements, or pass "
            "--allow-few-points to write the profiles anyway",
            field="data",
        )
    written = []
    if not opts.dry_run:
        folder = opts.folder()
        for g in targets:
            written.append(str(write_gpu_profile(result, g, folder / f"{g}.yaml", with_engines=True)))
    payload = _fit_payload(result, targets, few, written, opts.install and not opts.dry_run)
    if json_out:
        emit_json(payload)
        return
    _print_fit(result, targets, payload, opts.install)


def _with_project_data(
    new: list[Record], new_files: list[Path], bench: list[Path], project_data: bool
) -> tuple[list[Record], list[Path]]:
    """The records to fit and the files they came from: the given ones, plus with ``project_data`` the
    repository's measurements (those not given already; closed-loop serving points left out)."""
    from infercast.calibrate.load_fit import is_load

    records, files = list(new), list(new_files) + bench
    if project_data and PROJECT_DATA.is_dir():
        mine = {f.resolve() for f in new_files}
        extra = [f for f in measurement_files([PROJECT_DATA]) if f.resolve() not in mine]
        # closed-loop serving points are fitted by scripts/fit_profiles.py's engine stage, not here (minutes)
        project = [r for r in load_records(extra) if not is_load(r)] if extra else []
        records += _without_cpu(project, "calibrate") if project else []
        files += extra
    elif project_data:
        err_console.print(f"[yellow]note[/] {PROJECT_DATA} not found: fitting the given data only")
    return records, files


def _fit_payload(
    result: FitResult, targets: list[str], few: list[str], written: list[str], installed: bool
) -> dict[str, Any]:
    """calibrate's --json document: the errors before and after on the written GPUs, the values, the warnings."""
    idx = [i for i, r in enumerate(result.records) if r.gpu in targets]
    before = np.abs(np.exp(result.before[idx]) - 1)
    after = np.abs(np.exp(result.after[idx]) - 1)
    return {
        "points": len(result.records),
        "points_of_written_gpus": len(idx),
        "cpu_points_left_out": len(result.skipped),
        "median_abs_error_before": float(np.median(before)),
        "median_abs_error_after": float(np.median(after)),
        "fitted": result.values,
        "priors": result.priors,
        "converged": result.converged,
        "few_points": few,
        "at_bound": result.at_bounds(),
        "written": written,
        "installed": installed,
    }


def _print_fit(result: FitResult, targets: list[str], payload: dict, install: bool) -> None:
    """calibrate's report: warnings (few points, values on a bound), the fitted values, the error before and after,
    and how to use the written profile."""
    few, written = payload["few_points"], payload["written"]
    before, after = payload["median_abs_error_before"], payload["median_abs_error_after"]
    for line in few:
        err_console.print(f"[yellow]warning[/] few points: {line}")
    for b in result.at_bounds():
        err_console.print(
            f"warning: {b['parameter']} = {b['value']:.4g} sits on its {b['side']} bound ({b['bound']:g}): the data "
            "ask for more than the model allows there, so it is a limit, not a measurement",
            markup=False,
            highlight=False,
        )
    on = f"{payload['points_of_written_gpus']} on {', '.join(targets)}"
    t = Table(title=f"Calibration on {len(result.records)} points ({on})")
    for col in ("parameter", "prior", "fitted"):
        t.add_column(col, justify="left" if col == "parameter" else "right")
    for name, value in sorted(result.values.items()):
        t.add_row(name, f"{result.priors[name]:.4g}", f"{value:.4g}")
    console.print(t)
    where = f"; wrote {', '.join(written)}" if written else " (dry run)"
    console.print(f"median |error| on {', '.join(targets)}: {before:.1%} before -> {after:.1%} after{where}")
    if written and not install:
        console.print(
            f"use it: infercast --profile {written[0]} predict ... (any command; --install replaces the package's)",
            markup=False,
            highlight=False,
        )


ERROR_COLUMNS = ("points", "median |error|", "p90 |error|", "median signed", "inside p90 band")


ErrorRow = tuple[tuple[str, ...], str, Mapping[str, Any]]
"""A row of :func:`_error_table`: group values, metric, summary stats."""


def _group_rows(grouped: list[dict[str, object]]) -> list[ErrorRow]:
    """:func:`summarize_by`'s groups as :func:`_error_table` rows."""
    rows: list[ErrorRow] = []
    for s in grouped:
        group = s["group"]
        assert isinstance(group, dict)  # summarize_by: {"group": {field: value}, "metric": ..., **stats}
        rows.append((tuple(group.values()), str(s["metric"]), s))
    return rows


def _error_table(title: str, keys: list[str], rows: list[ErrorRow]) -> Table:
    """One row per (group values, metric, summary stats) of :func:`summarize` / :func:`summarize_by`."""
    t = Table(title=title)
    for col in (*keys, "metric", *ERROR_COLUMNS):
        t.add_column(col, justify="left" if col in (*keys, "metric") else "right")
    for values, metric, s in rows:
        inside = f"{s['within_p90_band']:.0%} of {s['banded_points']}" if "within_p90_band" in s else "-"
        t.add_row(
            *values,
            metric,
            str(s["points"]),
            f"{s['median_ape']:.1%}",
            f"{s['p90_ape']:.1%}",
            f"{s['median_signed']:+.1%}",
            inside,
        )
    return t


def _load(rec: Record) -> str:
    """How a point was loaded: '8 clients' (closed loop: the concurrency, not the prompt count), '2.5 req/s' (open
    loop) or '80 at once' (a static batch or an offline run)."""
    if rec.concurrency:
        return f"{rec.concurrency} clients"
    if rec.request_rate:
        return f"{rec.request_rate:g} req/s"
    return f"{rec.batch} at once" if rec.batch > 1 else "1"


def _value(metric: str, value: float) -> str:
    """A measured or predicted value with its unit: throughputs in tok/s, everything else a time."""
    return f"{value:,.1f} tok/s" if metric.endswith("throughput") else fmt_time(value)


def points_table(rows: list) -> Table:
    """``validate --points``: one row per point, its load (concurrency, not the prompt count), values with units;
    model, GPU, engine and TP go to the title when every point shares them, so that metric names stay whole."""
    recs = [r.record for r in rows]
    fields = {"model": "model", "gpu": "gpu", "engine": "engine", "tp": "tp"}
    shared = {h: str(getattr(recs[0], f)) for f, h in fields.items() if len({getattr(x, f) for x in recs}) == 1}
    varying = [(f, h) for f, h in fields.items() if h not in shared]
    title = "Points" + (f" of {' '.join(f'{h} {v}' for h, v in shared.items())}" if shared else "")
    p = Table(title=title + " (error = predicted / measured - 1)")
    p.add_column("metric", min_width=12, overflow="fold")
    for _, h in varying:
        p.add_column(h, overflow="fold")
    for col in ("load", "in tok", "out tok", "measured", "predicted", "error", "band (p90)"):
        p.add_column(col, no_wrap=True, justify="left" if col == "load" else "right")
    notes = [_note(r) for r in rows]
    if any(notes):
        p.add_column("note", overflow="fold")
    for r, note in zip(rows, notes, strict=True):
        rec = r.record
        p.add_row(
            r.metric,
            *(str(getattr(rec, f)) for f, _ in varying),
            _load(rec),
            str(rec.input_len),
            str(rec.output_len),
            _value(r.metric, r.measured),
            _value(r.metric, r.predicted),
            f"{r.error:+.1%}",
            f"±{r.band.typical:.0%} ({r.band.p90:.0%})" if r.band else "-",
            *([note] if any(notes) else []),
        )
    return p


def _note(row: Any) -> str:
    """What the point's simulation says about its mean TTFT: a cliff (its cause), or an opening burst (the TTFT
    after it)."""
    if row.cliff:
        return f"cliff ({'KV blocks' if row.cliff == 'kv' else 'batch slots'})"
    if row.burst is not None:
        return f"burst; {_value(row.metric, row.burst)} after it"
    return ""


def validate(
    data: DataOpt = None,
    bench: BenchOpt = None,
    points: Annotated[bool, typer.Option("--points", help="Also list every point.")] = False,
    priors_only: Annotated[
        bool, typer.Option("--priors", help="Use priors, not the installed fitted profiles.")
    ] = False,
    bench_format: BenchFormatOpt = "auto",
    model: ModelOpt = "",
    gpu: Annotated[str, typer.Option("--gpu", help="--bench: the GPU the benchmark ran on.")] = "",
    tp: TpOpt = None,
    ep: EpOpt = None,
    precision: PrecisionOpt = "",
    engine: EngineOpt = "",
    concurrency: ConcurrencyOpt = None,
    request_rate: RateOpt = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            help="Processes that predict the points (default 1; a big table of "
            "closed-loop rows goes about that many times faster).",
        ),
    ] = 1,
    by: Annotated[
        str,
        typer.Option(
            "--by",
            help=f"Also summarise per group of points: comma-separated {', '.join(GROUP_FIELDS)} "
            "(load: light <= 16 concurrent requests, medium <= 64, heavy).",
        ),
    ] = "",
    launch: LaunchOption = None,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Prediction vs measurement per point; median and p90 absolute % error by metric."""
    from infercast.calibrate.profile_fit import build_profiles
    from infercast.calibrate.validation import compare_each, group_fields, summarize, summarize_by

    fields = group_fields(by)  # an unknown field is refused before any file is read
    facts = RunFacts(model, gpu, tp, ep, precision, engine, concurrency, request_rate)
    parsed, facts = read_validate_launch(launch, facts) if launch is not None else (None, facts)
    records, _ = MeasurementSources(tuple(data or ()), tuple(bench or ()), bench_format, facts).records("validate")
    records = launched_records(records, parsed) if parsed else records
    profiles = build_profiles(sorted({(r.gpu, r.engine) for r in records}), {}, "prior") if priors_only else None
    rows, refused = compare_each(records, profiles, workers=workers)
    if not rows:
        raise InfercastError(f"no point could be predicted; first: {refused[0].reason}", field="data")
    summary = summarize(rows)
    if refused:
        reasons = sorted({u.reason.split(": ", 1)[-1] for u in refused})
        err_console.print(
            f"[yellow]note[/] {len(refused)} of {len(records)} points not predicted, e.g. "
            f"{refused[0].reason}"
            + (f" ({len(reasons)} distinct reasons; --json lists them all)" if len(reasons) > 1 else "")
        )
    grouped = summarize_by(rows, fields) if fields else []
    settings, deployments = record_settings(records)
    if json_out:
        emit_json(
            {
                "summary": summary,
                "groups": grouped or None,
                "points": [r.to_dict() for r in rows] if points else None,
                "unpredicted": [u.to_dict() for u in refused],
                "engine_settings": [e.to_dict() for e in settings],
                "deployments": deployments,
            }
        )
        return
    _print_validation(rows, summary, (fields, grouped), points, settings if deployments <= len(settings) else [])
    if deployments > len(settings):
        console.print(f"{deployments} deployments: --json gives the engine settings of the first {len(settings)}")


def _print_validation(
    rows: list, summary: dict, groups: tuple[list[str], list], points: bool, settings: list[EngineLaunch]
) -> None:
    """validate's tables: the summary, the groups asked for, the points, and the engine settings used."""
    fields, grouped = groups
    console.print(_error_table("Prediction vs measurement", [], [((), m, s) for m, s in summary.items()]))
    if grouped:
        console.print(_error_table(f"By {', '.join(fields)}", fields, _group_rows(grouped)))
    if any(r.band for r in rows):
        console.print(
            "inside p90 band: points whose error lies within the p90 of the error band predict/simulate "
            "print for their regime (about 90 % where the bands hold)"
        )
    if points:
        console.print(points_table(rows))
    for launched in settings:
        console.print(escape("\n".join(launched.lines())), highlight=False)
