"""Fit the cost model's efficiency and overhead parameters to measurements.

Least squares on log error (``log(predicted / measured)`` per record), bounded, in log-parameter space,
with a weak pull towards the priors so that parameters the data do not constrain stay at their prior (and
are reported as such). Deterministic: no random starts, so the same data give the same profile.

Kernel-level parameters belong to one GPU (``h100-sxm/hbm_efficiency``, ``h100-sxm/gemm_eff_max.bf16``);
engine-level ones (CPU overheads, launch costs, attention-kernel behaviour) are shared by every GPU the
engine runs on (``vllm:step_overhead_s``), so one fit over several GPUs pools what they have in common.

Rows measured on the CPU (``gpu`` = ``cpu``: the torch harness's plumbing runs) say nothing about a GPU and
are left out (:attr:`FitResult.skipped`). A record the cost model cannot price (a prediction that is not a
positive finite number) stops the fit with an error naming its ``path:row``, as does a least-squares failure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import least_squares

from infercast.calibrate.predict import deployment_of, fitted_gemm_key, located, predict_located
from infercast.cost.profile import (
    COMPUTE_BOUND_PARAMS,
    ENGINE_PARAMS,
    KERNEL_PARAMS,
    SAME_DIE,
    CostProfile,
    has_measured_kernels,
    load_profile,
)
from infercast.errors import InfercastError
from infercast.records.record import Record
from infercast.specs.catalog import get_hardware

CPU_LABEL = "cpu"
"""``gpu`` of rows the torch harness measured on the CPU: plumbing checks, never calibration data."""

BOUNDS: dict[str, tuple[float, float]] = {
    # Efficiencies are fractions of a datasheet peak: 1 is the physical ceiling; the floors only keep the
    # log-space fit away from 0 while admitting slow paths (fp32 CUDA-core GEMMs, SDPA's math backend).
    "gemm_eff_max": (0.05, 1.0),
    # rows at which a GEMM reaches half its best efficiency: from a fraction of one row (GEMVs already fast)
    # to 8192, the largest M the harness times (microbench.GPU_TOKEN_COUNTS): no data constrain it beyond.
    "gemm_m_half": (0.5, 8192.0),
    # stream copies reach 0.8-0.95 of datasheet HBM bandwidth on A100/H100/H200 (the published copy rows);
    # below 0.3 a "copy" is timing something else (host transfers, a throttled GPU).
    "hbm_efficiency": (0.3, 1.0),
    "attn_prefill_efficiency": (0.05, 1.0),
    "attn_decode_efficiency": (0.1, 1.0),
    "link_efficiency": (0.1, 1.0),
    # per all-reduce hop: NCCL's small-message latency is a few to ~20 us on NVLink; 200 us covers PCIe/Ethernet
    "allreduce_latency_s": (1e-7, 2e-4),
    # per kernel: ~1-3 us inside a CUDA graph, ~4-10 us launched eagerly from PyTorch (the harness's
    # launch_overhead rows); the ranges are a decade or more either side
    "kernel_overhead_graph_s": (1e-8, 5e-5),
    "kernel_overhead_eager_s": (1e-7, 1e-4),
    # engine CPU time per step (vLLM 0.6: ~1-5 ms), per sequence in the step, and per request (API server,
    # tokenisation); the ceilings are far above anything a serving engine that keeps a GPU busy spends
    "step_overhead_s": (1e-6, 0.05),
    "seq_overhead_s": (1e-9, 1e-3),
    "request_overhead_s": (1e-6, 0.5),
    "request_jitter_s": (1e-6, 0.5),
    # defined on [0, 1] (see CostProfile.decode_attn_group_reads); 1e-4 stands for 0 in log space
    "decode_attn_group_reads": (1e-4, 1.0),
    # an unfused engine's extra time per layer: ~60 kernels of ~1 us inside a graph, ~100 ops of ~5-10 us of
    # host dispatch eagerly (infercast's harness on an H100, data/harness/); the ceilings are ten times those
    "layer_overhead_graph_s": (1e-7, 1e-3),
    "layer_overhead_eager_s": (1e-6, 1e-2),
    # one decode-attention thread block without split-KV: ~40 GB/s on an H100 (the harness's batch-1 decode
    # steps); from a tenth of that to a whole GPU's bandwidth
    "decode_attn_cta_bytes_s": (4e9, 4e12),
    # host time per layer of an eager prompt step: ~0.65 ms in TensorRT-LLM 1.0's PyTorch backend (its closed-loop
    # mixed steps, benchmarks/mixed_steps.py); from a tenth of that to ten times
    "eager_layer_host_s": (6e-5, 6e-3),
    # an API server's serial time per streamed token: ~60-120 us for a Python process that detokenises and sends
    # every response (load_fit.FRONT_END_GRID); from a hundredth of that to ten times
    "stream_token_s": (1e-6, 1e-3),
    # time per token per all-reduce call beyond the collective curves: ~25 ns in vLLM 0.14's public TP >= 2 runs
    # (benchmarks/allreduce_token_fit.py); from a hundredth of that to four times (100 ns: an 8k prompt on an
    # 80-layer model would gain 0.13 s)
    "allreduce_token_s": (2.5e-10, 1e-7),
}
"""Lower and upper bound of each fitted parameter (per base name)."""
NOT_FITTED = ("graph_max_tokens",)
LOAD_ONLY = ("request_jitter_s", "stream_token_s")
"""Parameters only closed-loop serving runs inform (fitted when asked for by name: the engine load fit)."""
HARNESS_ONLY = ("layer_overhead_graph_s", "layer_overhead_eager_s", "decode_attn_cta_bytes_s")
"""Parameters of an unfused engine's layers and its decode attention without split-KV, fitted only when asked for
by name: calibrate/harness_fit.py fits the layer overheads; decode_attn_cta_bytes_s is read off the harness's decode
steps (benchmarks/harness_h100.py), and its bounds serve a user who fits it with ``calibrate``."""
READ_OFF = ("eager_layer_host_s", "allreduce_token_s")
"""Parameters read off measurements by a script (benchmarks/mixed_steps.py: TensorRT-LLM's mixed steps in its
closed-loop runs; benchmarks/allreduce_token_fit.py: vLLM 0.14's public silicon rows), fitted only when asked for
by name."""
PRIOR_WEIGHT = 0.1
"""Weight of the pull towards priors (per log-unit of parameter change), relative to one point's log error."""
SENSITIVITY = 2e-3
"""A parameter is fitted only if an e-fold change moves some prediction by more than 0.2%."""
MAX_EVALUATIONS = 400
"""Residual evaluations the solver may spend (the published fit converges in a few dozen)."""
PROFILE_DIR = Path(__file__).resolve().parents[1] / "cost" / "profiles"


def _round(x: float) -> float:
    return float(f"{x:.5g}")


def _base(name: str) -> str:
    """'h100-sxm/gemm_eff_max.bf16' -> 'gemm_eff_max'; 'vllm:step_overhead_s' -> 'step_overhead_s'."""
    return name.split(":", 1)[-1].split("/", 1)[-1].split(".", 1)[0]


def _scoped(values: dict[str, float], gpu: str, engine: str) -> dict[str, float]:
    """The values that apply to one (gpu, engine) pair, with their scope prefixes removed: a GPU sharing another's
    die (``SAME_DIE``) takes that GPU's compute-bound parameters, fitted on both GPUs' points."""
    sibling = f"{SAME_DIE[gpu]}/" if gpu in SAME_DIE else None
    out = {
        k.split("/", 1)[1]: v
        for k, v in values.items()
        if sibling and k.startswith(sibling) and _base(k) in COMPUTE_BOUND_PARAMS
    }
    out.update({k.split("/", 1)[1]: v for k, v in values.items() if k.startswith(f"{gpu}/")})
    out.update({k.split(":", 1)[1]: v for k, v in values.items() if k.startswith(f"{engine}:")})
    return out


BASES = ("prior", "kernels")
"""What a fit starts from: 'prior' (every parameter at its prior), or 'kernels' (the installed GPU kernel
parameters, engine parameters at their priors: the engine-under-load fit of scripts/fit_engines.py)."""


def base_profile(gpu: str, engine: str, base: str = "prior") -> CostProfile:
    """The profile a fit starts from (see :data:`BASES`)."""
    hw = get_hardware(gpu)
    prior = load_profile(hw.id, hw.architecture, engine, fitted=False)
    if base == "prior":
        return prior
    if base != "kernels":
        raise InfercastError(f"unknown fit base {base!r}; allowed: {', '.join(BASES)}", field="base")
    installed = load_profile(hw.id, hw.architecture, engine, fitted=True)
    prov = dict(installed.provenance) | {k: prior.provenance[k] for k in ENGINE_PARAMS}
    return replace(installed, provenance=prov, **{k: getattr(prior, k) for k in ENGINE_PARAMS})


def build_profiles(
    pairs: Sequence[tuple[str, str]], values: dict[str, float], provenance: str, base: str = "prior"
) -> dict[str, CostProfile]:
    """Profiles with ``values`` applied on top of ``base`` (:data:`BASES`), one per (gpu, engine) pair, keyed
    'gpu/engine'."""
    out = {}
    for gpu, eng in pairs:
        base_ = base_profile(gpu, eng, base)
        own = _scoped(values, gpu, eng)
        out[f"{gpu}/{eng}"] = base_.with_values(own, provenance) if own else base_
    return out


def candidate_parameters(records: Sequence[Record], keep_measured_curves: bool = False) -> dict[str, float]:
    """Every parameter the records could inform, with its prior value. ``keep_measured_curves``: not the GEMM
    curves and prefill attention of a GPU whose kernel tables measure them (the published fit's choice)."""
    params: dict[str, float] = {}
    for gpu in sorted({r.gpu for r in records}):
        mine = [r for r in records if r.gpu == gpu]
        with located(mine[0]):
            hw = get_hardware(gpu)
        keys, multi_gpu = set(), False
        for rec in mine:
            if rec.kind == "gemm":
                keys.add(fitted_gemm_key(rec.precision))
            elif rec.kind not in ("hbm_copy", "launch_overhead"):
                with located(rec):
                    dep = deployment_of(rec, layers=1 if rec.kind == "op" else None)
                keys |= {fitted_gemm_key(dep.compute_key), fitted_gemm_key(dep.attention_key)}
                multi_gpu |= rec.tp > 1
        prof = load_profile(hw.id, hw.architecture, mine[0].engine, fitted=False)
        die = SAME_DIE.get(gpu, gpu)  # one set of compute-bound parameters per die; the first GPU's prior
        # a GPU with measured GEMM tables keeps their curves (thousands of timed GEMMs, pooled over a die): fitted
        # end to end on TensorRT-LLM 0.6's H100 points they moved to absorb other terms (fp8 m_half 109 -> 257)
        # and, carried to the H200 (same die, faster HBM), turned its decode GEMMs compute-bound (held-out H200
        # TPOT median 17 -> 23-29 % on TensorRT-LLM and vLLM; docs/accuracy-notes.md)
        tables = keep_measured_curves and (has_measured_kernels(hw.id) or has_measured_kernels(die))
        for key in sorted(keys & set(prof.gemm_eff_max)) if not tables else ():
            params.setdefault(f"{die}/gemm_eff_max.{key}", prof.gemm_eff_max[key])
            params.setdefault(f"{die}/gemm_m_half.{key}", max(prof.gemm_m_half[key], 1.0))
        for name in KERNEL_PARAMS:
            if name in ("link_efficiency", "allreduce_latency_s") and not multi_gpu:
                continue
            if tables and name in COMPUTE_BOUND_PARAMS:
                continue  # measured prefill attention too (the same end-to-end shift moved it 0.36 -> 0.59)
            owner = die if name in COMPUTE_BOUND_PARAMS else gpu
            params.setdefault(f"{owner}/{name}", getattr(prof, name))
    for eng in sorted({r.engine for r in records}):
        first = next(r for r in records if r.engine == eng)
        with located(first):
            hw = get_hardware(first.gpu)
            prof = load_profile(hw.id, hw.architecture, eng, fitted=False)
        for name in ENGINE_PARAMS:
            if name not in NOT_FITTED:
                params[f"{eng}:{name}"] = getattr(prof, name)
    return params


def covered_parameters(records: Sequence[Record], new: Sequence[Record]) -> list[str]:
    """The parameters a fit should free when ``new`` are the user's measurements and ``records`` add others
    (the project's data, fitted jointly): the kernel parameters of the GPUs ``new`` ran on and the engine
    parameters of the engines it ran, nothing else (another engine's values stay as the package has them)."""
    gpus = {r.gpu for r in new}
    engines = {r.engine for r in new}
    mine = [r for r in records if r.gpu in gpus and r.gpu.strip().lower() != CPU_LABEL]
    out = []
    for name in candidate_parameters(mine) if mine else {}:
        scope, _, param = name.partition(":") if ":" in name else ("", "", name)
        if param in LOAD_ONLY + HARNESS_ONLY + READ_OFF:
            continue
        if (scope and scope in engines) or (not scope and name.split("/", 1)[0] in gpus):
            out.append(name)
    return out


BOUND_TOLERANCE = 1e-3
"""A fitted value within this fraction of a bound sits on it (the solver stops ~1e-4 inside a bound)."""


@dataclass
class FitResult:
    """Outcome of :func:`fit`: fitted values, the priors they replaced, errors before and after."""

    values: dict[str, float]
    priors: dict[str, float]
    sensitivity: dict[str, float]
    records: list[Record]
    before: np.ndarray
    after: np.ndarray
    source: str = ""
    skipped: list[Record] = field(default_factory=list)
    """Rows left out of the fit: measured on the CPU (``gpu`` = ``cpu``)."""
    converged: bool = True
    message: str = ""
    """The least-squares solver's own account of how it stopped."""
    base: str = "prior"
    """What the parameters not fitted were taken from (:data:`BASES`)."""

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return sorted({(r.gpu, r.engine) for r in self.records})

    @property
    def gpus(self) -> list[str]:
        return sorted({r.gpu for r in self.records})

    def fitted_for(self, gpu: str) -> dict[str, float]:
        """Fitted values a ``<gpu>.yaml`` would hold: the GPU's kernel parameters and its engines' ones."""
        engines = {r.engine for r in self.records if r.gpu == gpu}
        return {
            k: v
            for k, v in self.values.items()
            if k.startswith(f"{gpu}/") or (":" in k and k.split(":", 1)[0] in engines)
        }

    def underdetermined(self, gpus: Sequence[str] | None = None) -> list[str]:
        """Where the fit has at least as many free parameters as points informing them (it then only
        interpolates its priors); empty when every scope has more points than parameters.

        Scopes: each GPU (its kernel parameters plus those of engines measured on that GPU alone, against its
        points), and each engine measured on several GPUs (its parameters against all its points).
        """
        gpus = self.gpus if gpus is None else list(gpus)
        on: dict[str, set[str]] = {}
        for r in self.records:
            on.setdefault(r.engine, set()).add(r.gpu)
        out = []
        for gpu in gpus:
            own = {e for e, where in on.items() if where == {gpu}}
            free = [k for k in self.values if k.startswith(f"{gpu}/") or (k.split(":", 1)[0] in own and ":" in k)]
            points = sum(r.gpu == gpu for r in self.records)
            if free and len(free) >= points:
                out.append(f"gpu {gpu}: {len(free)} parameters fitted on {points} points")
        for eng in sorted(e for e, where in on.items() if len(where) > 1 and where & set(gpus)):
            free = [k for k in self.values if k.startswith(f"{eng}:")]
            points = sum(r.engine == eng for r in self.records)
            if free and len(free) >= points:
                out.append(f"engine {eng}: {len(free)} parameters fitted on {points} points")
        return out

    def at_bounds(self) -> list[dict[str, object]]:
        """Fitted values pushed onto a bound of :data:`BOUNDS` (an efficiency at 1.0, an overhead at its floor):
        the data ask for more than the model allows there, so the value is a limit, not a measurement."""
        out: list[dict[str, object]] = []
        for name, value in sorted(self.values.items()):
            lo, hi = BOUNDS[_base(name)]
            side = (
                "upper"
                if value >= hi * (1 - BOUND_TOLERANCE)
                else "lower"
                if value <= lo * (1 + BOUND_TOLERANCE)
                else ""
            )
            if side:
                out.append(
                    {"parameter": name, "value": _round(value), "bound": hi if side == "upper" else lo, "side": side}
                )
        return out

    def profiles(self) -> dict[str, CostProfile]:
        """Fitted profiles for every (gpu, engine) in the data, keyed 'gpu/engine'."""
        return build_profiles(self.pairs, self.values, f"fitted: {self.source}", self.base)

    def _fit_summary(self, records: list[int] | None = None) -> dict[str, object]:
        idx = range(len(self.records)) if records is None else records
        before = np.abs(np.exp(self.before[list(idx)]) - 1)
        after = np.abs(np.exp(self.after[list(idx)]) - 1)
        return {
            "points": len(before),
            "median_abs_error_before": _round(float(np.median(before))) if len(before) else None,
            "median_abs_error_after": _round(float(np.median(after))) if len(after) else None,
        }

    def gpu_profile(self, gpu: str, with_engines: bool) -> dict[str, object]:
        """YAML layout of ``cost/profiles/<gpu>.yaml``: kernel parameters, optionally engine overrides."""
        kernels: dict[str, Any] = {}
        sibling = SAME_DIE.get(gpu)
        for name, value in sorted(self.values.items()):
            shared = sibling and name.startswith(f"{sibling}/") and _base(name) in COMPUTE_BOUND_PARAMS
            if not (name.startswith(f"{gpu}/") or shared):
                continue
            param = name.split("/", 1)[1]
            if "." in param:
                group, key = param.split(".", 1)
                kernels.setdefault(group, {})[key] = _round(value)
            else:
                kernels[param] = _round(value)
        data: dict[str, object] = {"hardware": gpu, "fitted_from": self.source, "kernels": kernels}
        if with_engines:
            mine = {r.engine for r in self.records if r.gpu == gpu}
            data["engines"] = {e: v for e, v in self.engine_values().items() if e in mine}
        idx = [i for i, r in enumerate(self.records) if r.gpu == gpu]
        summary = self._fit_summary(idx)
        summary["priors"] = {k: _round(v) for k, v in sorted(self.priors.items()) if k.startswith(f"{gpu}/")}
        edge = [b["parameter"] for b in self.at_bounds() if str(b["parameter"]).startswith(f"{gpu}/")]
        if edge:
            summary["at_bound"] = edge
        if sibling and any(k.startswith(f"{sibling}/") for k in self.values):
            summary["same_die_as"] = f"{sibling}: {', '.join(COMPUTE_BOUND_PARAMS)} fitted on both GPUs' points"
        data["fit"] = summary
        return data

    def engine_values(self) -> dict[str, dict[str, float]]:
        engines: dict[str, dict[str, float]] = {}
        for name, value in sorted(self.values.items()):
            if ":" in name:
                eng, param = name.split(":", 1)
                engines.setdefault(eng, {})[param] = _round(value)
        return engines

    def engine_profile(self) -> dict[str, object]:
        """YAML layout of ``cost/profiles/engine_load.yaml``: engine parameters shared by every GPU."""
        return {
            "fitted_from": self.source,
            "engines": self.engine_values(),
            "fit": self._fit_summary() | {"priors": {k: _round(v) for k, v in sorted(self.priors.items()) if ":" in k}},
        }


def fit(
    records: Sequence[Record],
    *,
    gpus: Sequence[str] | None = None,
    prior_weight: float = PRIOR_WEIGHT,
    parameters: Sequence[str] | None = None,
    source: str = "",
    base: str = "prior",
    max_evaluations: int = MAX_EVALUATIONS,
    robust_scale: float | None = None,
    keep_measured_curves: bool = False,
) -> FitResult:
    """Fit the parameters that ``records`` constrain (restricted to ``gpus`` if given; CPU rows left out).
    ``keep_measured_curves``: see :func:`candidate_parameters` (scripts/fit_profiles.py sets it).

    ``parameters`` restricts the fit to those names; the others keep their ``base`` values (:data:`BASES`).
    ``robust_scale``: log errors beyond about this size count linearly, not squared (scipy's ``soft_l1`` loss),
    so a few points in a regime the model does not capture cannot drag the fit; None: plain least squares.
    """
    usable, skipped = _fit_rows(records, gpus)
    priors = _fit_priors(usable, parameters, keep_measured_curves)
    names = list(priors)
    pairs = sorted({(r.gpu, r.engine) for r in usable})
    measured = np.array([r.value_si for r in usable])

    def predictions(values: dict[str, float]) -> np.ndarray:
        profiles = build_profiles(pairs, values, "calibration trial", base)
        return np.array([predict_located(r, profiles) for r in usable])

    def log_errors(values: dict[str, float]) -> np.ndarray:
        return np.log(predictions(values) / measured)

    def clipped(name: str, value: float) -> float:
        lo, hi = BOUNDS[_base(name)]
        return min(max(value, lo * 1.0001), hi * 0.9999)

    u0 = np.log([clipped(n, priors[n]) for n in names])
    at_priors = predictions(priors)
    _check_predictions(usable, at_priors)
    start_err = np.log(at_priors / measured)
    sens = _sensitivities(priors, u0, start_err, log_errors)
    free = [n for n in names if sens[n] > SENSITIVITY]
    fixed = {n: priors[n] for n in names if n not in free}
    if not free:
        return FitResult({}, {}, sens, usable, start_err, start_err, source, skipped, base=base)
    idx = [names.index(n) for n in free]
    lower = np.log([BOUNDS[_base(n)][0] for n in free])
    upper = np.log([BOUNDS[_base(n)][1] for n in free])
    start = np.clip(u0[idx], lower + 1e-9, upper - 1e-9)

    def residuals(u: np.ndarray) -> np.ndarray:
        values = fixed | {n: math.exp(x) for n, x in zip(free, u, strict=True)}
        return np.concatenate([log_errors(values), prior_weight * (u - start)])

    robust = {} if robust_scale is None else {"loss": "soft_l1", "f_scale": robust_scale}
    result = least_squares(
        residuals, start, bounds=(lower, upper), method="trf", x_scale=1.0, max_nfev=max_evaluations, **robust
    )
    if result.status < 0:  # improper input: nothing was fitted
        raise InfercastError(f"the least-squares fit failed: {result.message}", field="data")
    fitted = {n: math.exp(x) for n, x in zip(free, result.x, strict=True)}
    after = log_errors(fixed | fitted)
    if not np.isfinite(after).all():
        raise InfercastError("the fitted parameters give non-finite predictions; nothing was fitted", field="data")
    return FitResult(
        fitted,
        {n: priors[n] for n in free},
        sens,
        usable,
        start_err,
        after,
        source,
        skipped,
        converged=bool(result.success),
        message=str(result.message),
        base=base,
    )


def _fit_rows(records: Sequence[Record], gpus: Sequence[str] | None) -> tuple[list[Record], list[Record]]:
    """(rows to fit, CPU rows left out) of ``records`` on ``gpus``; refused when no GPU row is left."""
    chosen = [r for r in records if gpus is None or r.gpu in gpus]
    usable = [r for r in chosen if r.gpu.strip().lower() != CPU_LABEL]
    skipped = [r for r in chosen if r.gpu.strip().lower() == CPU_LABEL]
    if not usable:
        why = (
            f": all {len(skipped)} were measured on the CPU (gpu 'cpu'), which tests the harness, not a GPU"
            if skipped
            else ""
        )
        raise InfercastError(
            "no measurements to fit" + (f" for gpu {', '.join(gpus)}" if gpus else "") + why, field="data"
        )
    return usable, skipped


def _fit_priors(
    usable: Sequence[Record], parameters: Sequence[str] | None, keep_measured_curves: bool
) -> dict[str, float]:
    """Prior values of the parameters to fit: ``parameters`` (each must be a candidate), else every candidate
    but those the load, harness and read-off stages own."""
    priors = candidate_parameters(usable, keep_measured_curves)
    if parameters is not None:
        unknown = set(parameters) - set(priors)
        if unknown:
            raise InfercastError(f"cannot fit {sorted(unknown)}; candidates: {sorted(priors)}", field="parameters")
        return {k: priors[k] for k in parameters}
    return {k: v for k, v in priors.items() if k.rsplit(":", 1)[-1] not in LOAD_ONLY + HARNESS_ONLY + READ_OFF}


def _sensitivities(
    priors: dict[str, float],
    u0: np.ndarray,
    start_err: np.ndarray,
    log_errors: Callable[[dict[str, float]], np.ndarray],
) -> dict[str, float]:
    """Per parameter, the largest change of any log error per e-fold change of it (finite difference in log
    space, stepping down where a step up would cross its bound)."""
    sens = {}
    for j, name in enumerate(priors):
        probe = dict(priors)
        step = 0.1 if math.exp(u0[j] + 0.1) <= BOUNDS[_base(name)][1] else -0.1
        probe[name] = math.exp(u0[j] + step)
        sens[name] = float(np.max(np.abs(log_errors(probe) - start_err)) / abs(step))
    return sens


def _check_predictions(records: Sequence[Record], predicted: np.ndarray) -> None:
    """Refuse to fit records the cost model gives no positive finite prediction for (log error undefined)."""
    bad = [i for i, p in enumerate(predicted) if not (math.isfinite(p) and p > 0)]
    if not bad:
        return
    listed = "; ".join(
        f"{records[i].where} ({' '.join(filter(None, (records[i].kind, records[i].op)))}: {predicted[i]:g})"
        for i in bad[:8]
    )
    more = f" and {len(bad) - 8} more" if len(bad) > 8 else ""
    raise InfercastError(
        f"the cost model predicts no positive finite value for {len(bad)} record(s), so they cannot be fitted: "
        f"{listed}{more}",
        field="data",
    )


def _header(what: str) -> str:
    return (
        f"# Fitted cost-model parameters ({what}); written by infercast's calibration (least squares on log\n"
        f"# error, prior weight {PRIOR_WEIGHT}). Do not edit by hand: re-run `python scripts/fit_profiles.py` or\n"
        "# `infercast calibrate`.\n"
    )


def write_gpu_profile(result: FitResult, gpu: str, path: str | Path | None = None, with_engines: bool = True) -> Path:
    """Write ``<gpu>.yaml`` (default: into the package, where predictions pick it up).

    Refuses (InfercastError) when the fit left every parameter of that GPU at its prior: such a file would
    only hide the priors behind a 'fitted' label.
    """
    data = result.gpu_profile(gpu, with_engines)
    if not data["kernels"] and not data.get("engines"):
        points = sum(r.gpu == gpu for r in result.records)
        raise InfercastError(
            f"nothing was fitted for {gpu}: its {points} points constrain no parameter beyond the 0.2% "
            "sensitivity threshold, so no profile was written",
            field="data",
        )
    path = Path(path) if path else PROFILE_DIR / f"{gpu}.yaml"
    _write(path, _header(gpu) + yaml.safe_dump(data, sort_keys=False))
    return path


def write_engine_profile(result: FitResult, path: str | Path | None = None) -> Path:
    """Write the shared engine parameters (default: the package's ``cost/profiles/engine_load.yaml``)."""
    path = Path(path) if path else PROFILE_DIR / "engine_load.yaml"
    _write(path, _header("engines, shared by all GPUs") + yaml.safe_dump(result.engine_profile(), sort_keys=False))
    return path


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise InfercastError(f"cannot write {path}: {exc.strerror or exc}", field="out") from None
