"""Fit the engine-under-load parameters of the serving engines on closed-loop benchmarks.

The GPU's kernel parameters stay as installed (fitted on kernel-level data); per engine, two CPU-side parameters
are fitted on that engine's closed-loop points (mean TTFT and mean TPOT): ``request_overhead_s`` and
``request_jitter_s``, the fixed and the varying (exponential, drawn per request) parts of the API server,
tokenisation and client time added to every TTFT and to every closed-loop round trip. The varying part decides
how far clients sending equal lengths drift out of lockstep, which sets closed-loop TTFT. A third, the API
server's serial time per streamed token (``stream_token_s``, :mod:`infercast.cost.front_end`), caps the tokens a
server streams per second; it is fitted after the two, on the mean error, since only the most loaded points
reach that ceiling (TensorRT-LLM Llama-3.1-8B at 64-128 clients: ~9.2k output tokens/s at TP 2, 4 and 8 alike).

The per-step and per-sequence overheads stay at their priors (cost/profiles/defaults.yaml: CPU time not
hidden by async scheduling / overlap, smaller for SGLang's and TensorRT-LLM's overlap schedulers).
Fitted on these points they do not stay physical: a per-step overhead moves to ~1.9 ms for vLLM and
TensorRT-LLM (a batch-1 decode of an 8B model would be overhead-bound, against published single-stream
measurements), a per-sequence one to 35 us for vLLM (18 ms of CPU per step at 512 sequences); both absorb
what the simulator misses elsewhere (closed-loop TTFT) while improving TPOT by 1-2 points only.

The estimator is least median (Rousseeuw's least median of squares, per metric): the parameters minimise the
median |log error| of the TTFT points plus that of the TPOT points, searched on a log grid (:data:`GRID`) and
then on a finer one around the best point (:data:`REFINE`). Closed-loop TTFT moves in steps as clients fall in
and out of lockstep, so the objective is rugged (a local least-squares solver started at the priors stayed
there), and a median ignores the regimes the simulator does not capture (TensorRT-LLM at 128 clients, 30-90 %
off) up to half the points, where a mean-type loss (soft-L1 on TensorRT-LLM's points: flat within 3 % between
17 % and 11 % median TTFT error) is decided by them.

Each engine's fit is separate (its points inform only its own parameters), which keeps every fit small and
the leave-one-group-out cross-validation of benchmarks/accuracy.py affordable. A fit uses at most
:data:`FIT_CONFIGS` benchmark points per engine, spread evenly over its configurations (tensor parallelism,
concurrency, lengths, model), to screen the grid (every evaluation simulates each of them); the
:data:`SHORTLIST` best grid points and the refinement around the best are then scored on all of the engine's
points. The screening alone left the choice to the subset: on TensorRT-LLM's Llama-3.1-8B points the objective
has two basins of nearly equal depth (3 ms + 10 ms and 20 ms + 3 ms; 0.118 against 0.123 on the subset, 0.130
against 0.123 on all points), and which one a subset picks decides how the fit carries to the other model.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import yaml

from infercast.calibrate.predict import predict_located
from infercast.calibrate.profile_fit import FitResult, build_profiles, candidate_parameters
from infercast.calibrate.serving import highest_served_rates
from infercast.records.record import Record

MEDIAN_PARAMS = ("request_overhead_s", "request_jitter_s")
"""Engine parameters of the least-median grid fit (see the module docstring)."""
FRONT_END_PARAM = "stream_token_s"
LOAD_PARAMS = (*MEDIAN_PARAMS, FRONT_END_PARAM)
"""Engine parameters fitted on closed-loop data (see the module docstring)."""
LOAD_KINDS = ("serving_ttft", "serving_tpot")
"""Kinds of the records a load fit uses: TTFT and TPOT of serving benchmarks run as closed loops."""
GRID = {
    "request_overhead_s": (0.001, 0.003, 0.01, 0.02, 0.05, 0.1),
    "request_jitter_s": (0.001, 0.003, 0.01, 0.02, 0.05),
}
"""Seconds tried for each load parameter (log-spaced, 1 ms to 100 ms: an API server's per-request time)."""
REFINE = 1.5
"""Second pass: every parameter at the best point x {1/REFINE, 1, REFINE}."""
FRONT_END_GRID = (0.0, 6e-5, 8e-5, 1e-4, 1.2e-4)
"""Seconds per streamed token tried for the API server's front-end (``CostProfile.stream_token_s``; 0: it never
binds). 60-120 us: a Python process that detokenises and sends every response, ~8-17k tokens/s."""
FRONT_END_TOLERANCE = 0.02
"""The front-end fit keeps the smallest value whose objective is within this fraction of the best: where the
data never reach a ceiling the objective is flat, and the front-end stays off (0)."""
FRONT_END_GAIN = 0.10
"""A front-end is kept only if it lowers the mean objective by at least this fraction. Below a ceiling its small
per-step delays act as a generic TTFT knob: fitted on TensorRT-LLM's Qwen3-32B points alone (at most 6.2k tokens/s)
60 us per token gained 6 % and carried badly to Llama-3.1-8B (benchmarks/accuracy.py, leaving a
model out: its 17-64-client TTFT 8 % -> 30 %); on Llama-3.1-8B's points, which reach a shared ~9.2k tokens/s at
TP 2, 4 and 8, 100 us gained 41 %. Set after seeing those two numbers (docs/accuracy-notes.md)."""


def is_load(rec: Record) -> bool:
    """A closed-loop serving TTFT or TPOT: the records the load fit uses (and the profile fit leaves)."""
    return rec.kind in LOAD_KINDS and rec.concurrency > 0


def closed_loop_records(records: Sequence[Record]) -> list[Record]:
    """The closed-loop records among ``records``."""
    return [r for r in records if is_load(r)]


FIT_CONFIGS = 48
"""Benchmark points (a TTFT and a TPOT record each) on which an engine fit screens its grid, at most."""
SHORTLIST = 4
"""Grid points, the best on the screening subset, that an engine fit scores again on all its records."""


def spread(records: Sequence[Record], limit: int = FIT_CONFIGS) -> list[Record]:
    """At most ``limit`` benchmark points (both their records), evenly spaced in (tp, concurrency, lengths,
    model) order: a deterministic subset covering every regime the engine was measured in."""
    key = lambda r: (r.tp, r.concurrency, r.input_len, r.output_len, r.model, r.precision)  # noqa: E731
    points = sorted({key(r) for r in records})
    if len(points) > limit:
        points = [points[round(i * (len(points) - 1) / (limit - 1))] for i in range(limit)]
    keep = set(points)
    return [r for r in records if key(r) in keep]


def median_cost(log_errors: np.ndarray, kinds: np.ndarray) -> float:
    """The load fit's objective: the median |log error| of each metric (TTFT, TPOT), summed."""
    return float(sum(np.median(np.abs(log_errors[kinds == k])) for k in np.unique(kinds)))


def mean_cost(log_errors: np.ndarray, kinds: np.ndarray) -> float:
    """The front-end fit's objective: the mean |log error| of each metric (TTFT, TPOT), summed. A mean, unlike
    the median fit's objective, is moved by the tail of loaded points where a front-end ceiling acts."""
    return float(sum(np.mean(np.abs(log_errors[kinds == k])) for k in np.unique(kinds)))


def fit_load(records: Sequence[Record], engine: str, *, source: str = "") -> FitResult:
    """Fit ``engine``'s :data:`LOAD_PARAMS` on its closed-loop ``records`` (see the module docstring); the GPU
    kernel parameters as installed.

    First the least-median grid fit of :data:`MEDIAN_PARAMS` (front-end at its prior): the grid is screened on
    :func:`spread`'s subset, its :data:`SHORTLIST` best points are scored again on every record, and the
    refinement uses every record. Then the front-end's time per token on :data:`FRONT_END_GRID`, by
    :func:`mean_cost` on every record (the smallest value within :data:`FRONT_END_TOLERANCE` of the best; none
    slower than the highest output rate the records sustained, none unless it gains :data:`FRONT_END_GAIN`);
    where it binds, the median fit is searched again with it (its wait adds to every TTFT, which the first
    search had put into the per-request times)."""
    names = [f"{engine}:{p}" for p in MEDIAN_PARAMS]
    stream = f"{engine}:{FRONT_END_PARAM}"
    candidates = candidate_parameters(records)
    priors = {n: candidates[n] for n in [*names, stream]}
    pairs = sorted({(r.gpu, r.engine) for r in records})
    screen = spread(records)

    def log_errors(values: dict[str, float], chosen: Sequence[Record] = records) -> np.ndarray:
        profiles = build_profiles(pairs, values, "calibration trial", "kernels")
        measured = np.array([r.value_si for r in chosen])
        return np.log(np.array([predict_located(r, profiles) for r in chosen]) / measured)

    def objective(chosen: Sequence[Record], front_end: float) -> tuple[Callable[[tuple[float, ...]], float], dict]:
        """The median objective on ``chosen`` records at a front-end time per token (memoised) and its memo."""
        kinds, tried = np.array([r.kind for r in chosen]), {}

        def cost(point: tuple[float, ...]) -> float:
            if point not in tried:
                values = dict(zip(names, point, strict=True)) | {stream: front_end}
                tried[point] = median_cost(log_errors(values, chosen), kinds)
            return tried[point]

        return cost, tried

    def median_fit(front_end: float) -> tuple[tuple[float, ...], str]:
        """The least-median grid search at a front-end time per token: best point and a line on how it went."""
        (rough, screened), (cost, scored) = objective(screen, front_end), objective(records, front_end)
        start = tuple(priors[n] for n in names)
        grid = sorted([start, *itertools.product(*(GRID[p] for p in MEDIAN_PARAMS))], key=rough)
        best = min(grid[:SHORTLIST], key=cost)
        best = min([best, *itertools.product(*((v / REFINE, v, v * REFINE) for v in best))], key=cost)
        return best, (
            f"{len(screened)} points screened on {len(screen) // 2} benchmark points, {len(scored)} "
            f"scored on all {len(records) // 2}; objective {cost(start):.4f} at the priors, "
            f"{cost(best):.4f} fitted"
        )

    best, line = median_fit(priors[stream])
    message = f"least-median grid search: {line}"
    kinds = np.array([r.kind for r in records])
    at = dict(zip(names, best, strict=True))
    allowed = front_end_candidates(records, engine, priors[stream])
    tail = {c: mean_cost(log_errors(at | {stream: c}), kinds) for c in allowed}
    lowest = min(tail.values())
    front_end = min(c for c, v in tail.items() if v <= lowest * (1 + FRONT_END_TOLERANCE))
    if tail[front_end] > (1 - FRONT_END_GAIN) * tail[priors[stream]]:
        front_end = priors[stream]
    if front_end != priors[stream]:
        best, line = median_fit(front_end)
        message += (
            f"; front-end {front_end * 1e6:.0f} us per token (mean objective {tail[priors[stream]]:.4f} "
            f"at the prior, {tail[front_end]:.4f} with it); searched again with it: {line}"
        )
    fitted = dict(zip(names, best, strict=True)) | {stream: front_end}
    return FitResult(
        fitted,
        priors,
        {},
        list(records),
        log_errors(priors),
        log_errors(fitted),
        source,
        base="kernels",
        message=message,
    )


def front_end_candidates(records: Sequence[Record], engine: str, prior: float) -> list[float]:
    """The front-end times per token the fit tries: the prior and every :data:`FRONT_END_GRID` value no slower
    than the highest output rate ``records`` sustained (the front-end kept up with every rate measured)."""
    top = highest_served_rates(records).get(engine, {}).get("output_tokens_per_s", 0.0)
    return [c for c in sorted({prior, *FRONT_END_GRID}) if c == prior or c * top <= 1.0]


def at_grid_edge(values: dict[str, float], records: Sequence[Record] = ()) -> list[str]:
    """Fitted parameters at the smallest or largest value the search tries (the optimum may lie beyond). The
    front-end's largest is the slowest its records' rates allow (:func:`front_end_candidates`), given them."""
    out = []
    for name, v in values.items():
        engine, base = name.split(":", 1)
        if base == FRONT_END_PARAM:  # no refinement; 0 (off) is a value, not an edge
            tried = front_end_candidates(records, engine, 0.0) if records else FRONT_END_GRID
            if v > 0 and v >= max(tried):
                out.append(name)
            continue
        grid = GRID[base]
        if v <= min(grid) / REFINE * (1 + 1e-9) or v >= max(grid) * REFINE * (1 - 1e-9):
            out.append(name)
    return out


def fit_engines(records: Sequence[Record], *, source: str = "") -> dict[str, FitResult]:
    """One fit per engine of its :data:`LOAD_PARAMS` on its closed-loop records (kernels as installed)."""
    chosen = closed_loop_records(records)
    return {
        engine: fit_load([r for r in chosen if r.engine == engine], engine, source=source)
        for engine in sorted({r.engine for r in chosen})
    }


def fitted_values(results: dict[str, FitResult]) -> dict[str, float]:
    """All engines' fitted values in one dict ('engine:param' -> value)."""
    return {k: v for res in results.values() for k, v in res.values.items()}


def engine_versions(records: Sequence[Record]) -> dict[str, list[str]]:
    """Engine versions named in the records' notes ('<engine> <version>; ...', as the importer writes them)."""
    out: dict[str, set[str]] = {}
    for r in closed_loop_records(records):
        head = r.notes.split(";", 1)[0].split()
        if len(head) == 2 and head[0] == r.engine:
            out.setdefault(r.engine, set()).add(head[1])
    return {e: sorted(v) for e, v in sorted(out.items())}


def metric_errors(res: FitResult) -> dict[str, dict[str, float]]:
    """Median |error| of each metric (TTFT, TPOT) at the priors and fitted: the fit minimises the sum of the two
    medians, so a single median over both metrics' records can rise while the objective falls."""
    kinds = np.array([r.kind for r in res.records])
    out = {}
    for kind in LOAD_KINDS:
        mine = kinds == kind
        if mine.any():
            before, after = (float(np.median(np.abs(np.expm1(e[mine])))) for e in (res.before, res.after))
            out[kind.removeprefix("serving_")] = {"before": float(f"{before:.4g}"), "after": float(f"{after:.4g}")}
    return out


def write_engine_load(results: dict[str, FitResult], records: Sequence[Record], path: Path, source: str) -> None:
    """Merge the fitted load parameters into ``engine_load.yaml`` (other engines' values kept), with the engine
    versions and points each was fitted on and each metric's error (:func:`metric_errors`)."""
    data = yaml.safe_load(path.read_text()) if path.is_file() else {}
    data = data or {}
    engines = data.setdefault("engines", {})
    versions = engine_versions(records)
    summary = {}
    for engine, res in results.items():
        engines.setdefault(engine, {}).update({k.split(":", 1)[1]: float(f"{v:.5g}") for k, v in res.values.items()})
        summary[engine] = {
            "versions": versions.get(engine, []),
            "points": len(res.records),
            "median_abs_error": metric_errors(res),
            "method": res.message,
            "at_edge": at_grid_edge(res.values, res.records),
            "priors": {k: float(f"{v:.5g}") for k, v in res.priors.items()},
        }
    sources = [s for s in [*str(data.get("fitted_from", "")).split(", "), source] if s]
    data["fitted_from"] = ", ".join(dict.fromkeys(sources))
    data["load_fit"] = {"source": source, "parameters": list(LOAD_PARAMS), "engines": summary}
    header = (
        "# Fitted cost-model parameters (engines, shared by all GPUs); written by scripts/fit_profiles.py: kernel-\n"
        "# level and static-batch points (infercast.calibrate.profile_fit), then each serving engine's load\n"
        "# parameters on closed-loop benchmarks (infercast.calibrate.load_fit, 'load_fit'). Do not edit by hand.\n"
    )
    path.write_text(header + yaml.safe_dump(data, sort_keys=False))
