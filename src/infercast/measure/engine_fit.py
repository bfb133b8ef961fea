"""Fit the engine-under-load parameters of the serving engines on closed-loop benchmarks.

The GPU's kernel parameters stay as installed (fitted on kernel-level data); per engine, one CPU-side
parameter is fitted on that engine's closed-loop points (mean TTFT and mean TPOT): ``request_overhead_s``,
the API server, tokenisation and client time added to every TTFT (and to every closed-loop round trip).

The per-step and per-sequence overheads stay at their priors (cost/profiles/defaults.yaml: CPU time not
hidden by async scheduling / overlap, smaller for SGLang's and TensorRT-LLM's overlap schedulers).
Fitted on these points they do not stay physical: a per-step overhead moves to ~1.9 ms for vLLM and
TensorRT-LLM (a batch-1 decode of an 8B model would be overhead-bound, against published single-stream
measurements), a per-sequence one to 35 us for vLLM (18 ms of CPU per step at 512 sequences); both absorb
what the simulator misses elsewhere (closed-loop TTFT) while improving TPOT by 1-2 points only.

Each engine's fit is separate (its points inform only its own parameters), which keeps every fit small and
the leave-one-group-out cross-validation of benchmarks/accuracy.py affordable. A fit
uses at most :data:`FIT_CONFIGS` benchmark points per engine, spread evenly over its configurations
(tensor parallelism, concurrency, lengths, model): every residual evaluation simulates each of them, and
one parameter needs far fewer than the few hundred points an engine may have. The loss is robust
(:data:`ROBUST_SCALE`): regimes the simulator does not capture (TensorRT-LLM at 128 clients, 30-90 % off) would
otherwise pull the one overhead that sets every low-load TTFT. On the H100 closed-loop file, 16 points with plain
least squares give 22.5 % held-out median TTFT error, 48 points with the robust loss 20.9 % (README, Accuracy).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

from infercast.measure.calibrate import FitResult, fit
from infercast.measure.records import Record

LOAD_PARAMS = ("request_overhead_s", "request_jitter_s")
"""Engine parameters fitted on closed-loop data (see the module docstring)."""
LOAD_KINDS = ("closed_loop_ttft", "closed_loop_tpot")
MAX_EVALUATIONS = 40
"""Residual evaluations per engine fit (each simulates the fit's points, under a second): the robust loss needs
~20-30 to converge on one parameter (8, the earlier limit, stopped TensorRT-LLM's fit at 57 ms on its way to 87;
``converged`` in engines.yaml's load_fit says whether each fit ended at its optimum)."""


def load_records(records: Sequence[Record]) -> list[Record]:
    """The closed-loop records among ``records``."""
    return [r for r in records if r.kind in LOAD_KINDS]


ROBUST_SCALE = 0.1
"""Log error (about 10 %) beyond which a point's residual counts linearly in the load fit (see calibrate.fit)."""
FIT_CONFIGS = 48
"""Benchmark points (a TTFT and a TPOT record each) per engine fit, at most."""


def spread(records: Sequence[Record], limit: int = FIT_CONFIGS) -> list[Record]:
    """At most ``limit`` benchmark points (both their records), evenly spaced in (tp, concurrency, lengths,
    model) order: a deterministic subset covering every regime the engine was measured in."""
    key = lambda r: (r.tp, r.batch, r.input_len, r.output_len, r.model, r.precision)  # noqa: E731
    points = sorted({key(r) for r in records})
    if len(points) > limit:
        points = [points[round(i * (len(points) - 1) / (limit - 1))] for i in range(limit)]
    keep = set(points)
    return [r for r in records if key(r) in keep]


def fit_engines(records: Sequence[Record], *, source: str = "") -> dict[str, FitResult]:
    """One fit per engine of its :data:`LOAD_PARAMS` on its closed-loop records (kernels as installed)."""
    chosen = load_records(records)
    out = {}
    for engine in sorted({r.engine for r in chosen}):
        mine = spread([r for r in chosen if r.engine == engine])
        out[engine] = fit(mine, parameters=[f"{engine}:{p}" for p in LOAD_PARAMS], base="kernels",
                          source=source, max_evaluations=MAX_EVALUATIONS, robust_scale=ROBUST_SCALE)  # fmt: skip
    return out


def fitted_values(results: dict[str, FitResult]) -> dict[str, float]:
    """All engines' fitted values in one dict ('engine:param' -> value)."""
    return {k: v for res in results.values() for k, v in res.values.items()}


def engine_versions(records: Sequence[Record]) -> dict[str, list[str]]:
    """Engine versions named in the records' notes ('<engine> <version>; ...', as the importer writes them)."""
    out: dict[str, set[str]] = {}
    for r in load_records(records):
        head = r.notes.split(";", 1)[0].split()
        if len(head) == 2 and head[0] == r.engine:
            out.setdefault(r.engine, set()).add(head[1])
    return {e: sorted(v) for e, v in sorted(out.items())}


def write_engine_load(results: dict[str, FitResult], records: Sequence[Record], path: Path, source: str) -> None:
    """Merge the fitted load parameters into ``engines.yaml`` (other engines' values kept), with the engine
    versions and points each was fitted on."""
    data = yaml.safe_load(path.read_text()) if path.is_file() else {}
    data = data or {}
    engines = data.setdefault("engines", {})
    versions = engine_versions(records)
    summary = {}
    for engine, res in results.items():
        engines.setdefault(engine, {}).update({k.split(":", 1)[1]: float(f"{v:.5g}") for k, v in res.values.items()})
        before, after = np.abs(np.exp(res.before) - 1), np.abs(np.exp(res.after) - 1)
        summary[engine] = {
            "versions": versions.get(engine, []),
            "points": len(res.records),
            "median_abs_error_before": float(f"{np.median(before):.4g}"),
            "median_abs_error_after": float(f"{np.median(after):.4g}"),
            "converged": res.converged,
            "priors": {k: float(f"{v:.5g}") for k, v in res.priors.items()},
        }
    sources = [s for s in [*str(data.get("fitted_from", "")).split(", "), source] if s]
    data["fitted_from"] = ", ".join(dict.fromkeys(sources))
    data["load_fit"] = {"source": source, "parameters": list(LOAD_PARAMS), "engines": summary}
    header = (
        "# Fitted cost-model parameters (engines, shared by all GPUs); written by scripts/fit_profiles.py: kernel-\n"
        "# level and static-batch points (infercast.measure.calibrate), then each serving engine's load parameters\n"
        "# on closed-loop benchmarks (infercast.measure.engine_fit, 'load_fit'). Do not edit by hand.\n"
    )
    path.write_text(header + yaml.safe_dump(data, sort_keys=False))
