"""Expected error of a prediction, by regime, from the cross-validated accuracy report.

``benchmarks/accuracy.py --write`` writes ``infercast/data/error_bands.yaml``: for each metric (TTFT,
TPOT) and regime, the median and 90th-percentile absolute error of leave-one-group-out predictions (each
point predicted by profiles fitted without its engine, its TP or its model). A prediction looks up its
regime, the most specific row with enough points winning:

- ``gpu``: ``fitted`` (the GPU has a fitted kernel profile) or ``prior`` (priors only: the priors-only error
  measured on the calibration data; used only when the held-out bands below were never written);
- ``engine``: vllm, sglang, trtllm (or any; an engine the serving data never measured takes the held-out band);
- ``load``: ``light`` (<= 16 concurrent requests), ``medium`` (<= 64), ``heavy`` (more);
- ``tp``: 1-2 or 4-8.

A GPU, a model or an engine release that the serving calibration never measured (a prior-only GPU included) takes
its band from ``infercast/data/heldout_bands.yaml`` instead, which ``benchmarks/heldout_silicon.py --write``
derives from published serving sweeps of other GPUs and models that almost nothing is fitted to: the same median and
p90 of |error|, by engine and load. The cross-validated bands measured how well infercast does inside its
calibration; outside it they were 2-4x too narrow (31-41 % of those points inside their p90 band), so those
predictions get the error measured out there. One cost-model parameter is fitted to those points, vLLM 0.14's
per-token all-reduce time (``cost/profiles/silicon_fit.yaml``, whose script reports it left out by model and by
GPU), besides the MTP acceptance of the runs that drafted (a reading of those runs); otherwise they set how sure a
prediction says it is, not what it says. A simulated run on a cliff (TTFT mostly queueing for KV blocks or batch slots,
``sim/cliff.py``) takes its TTFT band from that file's ``cliff`` section instead (:func:`cliff_band`): the error
on those points whose own simulation was on a cliff of the same cause.

Warnings say when a scenario lies outside what was calibrated: a prior-only GPU, a GPU, a model or an engine
release the serving data never measured, a parallelism never measured (tp > 8, expert parallelism, pipeline),
a model family never measured (MoE, MLA), a load near
saturation (preemptions when the KV cache runs out, or an open-loop run that cannot keep up), a rate per
server (requests/s, output tokens/s) above the highest the engine served in the calibration data, where
host-side limits the cost model does not price bound the measured runs (``benchmarks/ttft_signatures.py``),
or a load below the fewest clients the engine was measured at, where its fitted per-request time (fitted on
clients arriving together) was never checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from infercast.cost.profile import (
    fitted_as,
    fitted_engine_values,
    harness_fit,
    has_fitted_profile,
    has_measured_kernels,
    load_fit,
)
from infercast.files import parse_package_yaml

if TYPE_CHECKING:
    from infercast.specs.deployment import Deployment

BANDS_FILE = "error_bands.yaml"
HELDOUT_FILE = "heldout_bands.yaml"
MIN_POINTS = 8
"""A regime row needs this many cross-validated points to be used (else a coarser row answers)."""
LOAD_LEVELS = ((16, "light"), (64, "medium"))
"""Concurrent requests up to 16: light; up to 64: medium; more: heavy."""
DIMENSIONS = ("gpu", "engine", "load", "tp")
"""Regime dimensions, most to least important (the lookup drops them from the end when data are thin)."""
HELDOUT_DIMENSIONS = ("engine", "load")
"""Regime dimensions of the held-out bands (every point there is outside the calibration: no gpu or tp split)."""
HELDOUT_REGIME = "published sweeps never fitted"
"""The ``data`` entry of a held-out band's regime."""
CLIFF_REGIME = "published sweeps never fitted, points on a cliff"
"""The ``data`` entry of a cliff band's regime (:func:`cliff_band`)."""


def load_level(concurrency: int) -> str:
    for top, name in LOAD_LEVELS:
        if concurrency <= top:
            return name
    return "heavy"


def tp_group(tp: int) -> str:
    return "1-2" if tp <= 2 else "4-8" if tp <= 8 else ">8"


def _package_yaml(name: str) -> dict[str, Any]:
    ref = resources.files("infercast.data").joinpath(name)
    return parse_package_yaml(ref.read_text()) if ref.is_file() else {}


@cache
def bands_table() -> dict[str, Any]:
    """The committed bands file (empty when it was never written)."""
    return _package_yaml(BANDS_FILE)


@cache
def heldout_table() -> dict[str, Any]:
    """The committed held-out bands (published sweeps never fitted; empty when never written)."""
    return _package_yaml(HELDOUT_FILE)


@cache
def calibration_scope() -> dict[str, Any]:
    """What the bands were measured on: GPUs, engines, tensor-parallel sizes, models."""
    return bands_table().get("calibrated", {})


@dataclass(frozen=True)
class ErrorBand:
    """Expected relative error of one predicted metric in its regime."""

    metric: str
    typical: float
    """Median absolute relative error of cross-validated predictions in this regime."""
    p90: float
    points: int
    regime: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "typical_pct": round(100 * self.typical, 1),
            "p90_pct": round(100 * self.p90, 1),
            "points": self.points,
            "regime": self.regime,
        }

    def text(self) -> str:
        return f"± {100 * self.typical:.0f} %"


@dataclass(frozen=True)
class Confidence:
    """Bands for every metric of a prediction and the warnings about its regime."""

    bands: dict[str, ErrorBand]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"error_bands": {k: b.to_dict() for k, b in self.bands.items()}, "warnings": self.warnings}

    def text(self, metric: str) -> str:
        band = self.bands.get(metric)
        return f" {band.text()}" if band else ""


_memo: dict[tuple[str, bool, tuple[str, ...]], ErrorBand | None] = {}
_memo_tables: list[Any] = [None, None]
"""Band lookups of the current tables (predict calls this per prediction); reset when a table object changes."""


def _lookup(metric: str, regime: dict[str, str], outside: bool) -> ErrorBand | None:
    """The band of ``regime``: from the held-out table when the scenario is ``outside`` the serving calibration
    (and that table was written), else from the cross-validated one."""
    tables = [bands_table(), heldout_table()]
    if tables[0] is not _memo_tables[0] or tables[1] is not _memo_tables[1]:  # no generator: predict's hot path
        _memo.clear()
        _memo_tables[:] = tables
    held_out = outside and bool(tables[1].get("bands"))
    dims = HELDOUT_DIMENSIONS if held_out else DIMENSIONS
    key = (metric, held_out, tuple(regime[d] for d in dims))
    if key not in _memo:
        found = find_band(tables[held_out], metric, regime, dims)
        if found is not None and held_out:
            found = ErrorBand(metric, found.typical, found.p90, found.points, {"data": HELDOUT_REGIME, **found.regime})
        _memo[key] = found
    return _memo[key]


def cliff_band(cause: str) -> ErrorBand | None:
    """The TTFT band of a run on a cliff of ``cause`` (``"kv"``, ``"slots"``: :func:`infercast.sim.cliff.find_cliff`):
    median and p90 |error| of mean TTFT over the published sweeps' points whose simulation is on such a cliff (the
    held-out file's ``cliff`` section, pooled over both causes where one had too few points); None when never
    written."""
    row = heldout_table().get("cliff", {}).get("bands", {}).get(cause)
    if not row:
        return None
    data = CLIFF_REGIME + (", all causes pooled" if "pooled" in row else "")
    return ErrorBand("ttft", row["typical"], row["p90"], row["points"], {"data": data, "cliff": cause})


def find_band(
    table: dict[str, Any], metric: str, regime: dict[str, str], dims: tuple[str, ...] = DIMENSIONS
) -> ErrorBand | None:
    """The most specific row of ``table`` matching a regime over ``dims`` (dropped from the end until a row has
    :data:`MIN_POINTS`)."""
    rows = table.get("bands", [])
    for depth in range(len(dims), -1, -1):
        want = {d: regime[d] for d in dims[:depth]}
        for row in rows:
            if row["metric"] != metric or row["points"] < MIN_POINTS:
                continue
            if all(row.get(d, "*") == v for d, v in want.items()) and all(row.get(d, "*") == "*" for d in dims[depth:]):
                return ErrorBand(metric, row["typical"], row["p90"], row["points"], {**want})
    return None


FRONT_END_BINDS = 0.9
"""A front-end busy this share of a run or more sets its latencies: a single server's queue grows without bound as
its utilisation nears 1 (about nine service times of wait at 0.9 for exponential service)."""

RATE_MARGIN = 1.1
"""A rate up to 10 % above the highest one measured counts as inside the calibrated range."""
RATE_NAMES = {"requests_per_s": "requests/s", "output_tokens_per_s": "output tokens/s"}

CALIBRATED_ATTENTION = ("GQA", "MHA")
"""Attention kinds of the models behind the committed error bands (Llama, Qwen3 dense; Llama-2 MHA)."""


class Regime(NamedTuple):
    """What a prediction's expected error depends on: the GPU and engine (catalog ids), the parallel layout, the
    load (``concurrency`` requests per server) and the model (catalog id, MoE, MLA, ``ModelSpec.attention_kind``)."""

    gpu: str
    engine: str
    tp: int = 1
    ep: int = 1
    pp: int = 1
    attention_dp: int = 1
    concurrency: int = 1
    moe: bool = False
    mla: bool = False
    attention: str = "GQA"
    model: str | None = None

    @classmethod
    def of(cls, dep: Deployment, concurrency: int) -> Regime:
        """The regime of a resolved deployment at ``concurrency`` requests per server."""
        model = dep.model
        # positional, in field order: predict builds one per call
        return cls(
            dep.hardware.id,
            dep.engine.id,
            dep.tp,
            dep.ep,
            dep.pp,
            dep.attention_dp,
            concurrency,
            model.is_moe,
            model.mla is not None,
            model.attention_kind,
            model.id,
        )


def deployment_confidence(
    dep: Deployment,
    concurrency: int,
    *,
    rates: dict[str, float] | None = None,
    saturated: bool = False,
    front_end: tuple[float, float] | None = None,
) -> Confidence:
    """:func:`confidence` for a resolved deployment (GPU, engine, layout and model read off it) at ``concurrency``
    requests per server."""
    return confidence(Regime.of(dep, concurrency), saturated=saturated, rates=rates, front_end=front_end)


def confidence(
    regime: Regime,
    *,
    metrics: tuple[str, ...] = ("ttft", "tpot"),
    saturated: bool = False,
    rates: dict[str, float] | None = None,
    front_end: tuple[float, float] | None = None,
) -> Confidence:
    """Error bands and out-of-calibration warnings for a prediction in ``regime`` (see the module docstring);
    ``saturated``: the run ran out of KV cache or could not keep up; ``rates``: what one server serves in the
    scenario (``requests_per_s``, ``output_tokens_per_s``), checked against the calibration data's highest;
    ``front_end``: the share of a simulated run the API server's front-end was busy and its seconds per streamed
    token (:data:`FRONT_END_BINDS`)."""
    gpu, engine = regime.gpu, regime.engine
    harness = harness_fit()
    on_harness = bool(harness) and engine == harness.get("engine")
    scope = calibration_scope()
    unseen = [] if on_harness else _unseen(scope, gpu, regime.model)
    engine_unseen = not on_harness and engine not in scope.get("engines", [engine])
    if on_harness:
        bands = _harness_bands(harness, metrics)
    else:
        bands = _regime_bands(regime, metrics, bool(unseen) or engine_unseen)
    held_out = any(b.regime.get("data") == HELDOUT_REGIME for b in bands.values())
    warnings = _profile_warnings(gpu)
    if unseen:
        warnings.append(_unseen_warning(unseen, scope, held_out))
    if on_harness:
        warnings.append(
            f"engine {engine} is infercast's own harness: its overheads are fitted to its static-batch "
            "runs (data/harness/), never measured under load"
        )
    elif engine_unseen:
        warnings.append(_engine_unseen_warning(engine, scope, held_out and not unseen))
    warnings += _scenario_warnings(regime, scope)
    if saturated:
        warnings.append("near saturation: the KV cache ran out (preemptions) or the load outruns the engine")
    if rates:
        warnings.extend(_rate_warnings(engine, rates))
    if front_end is not None and front_end[0] >= FRONT_END_BINDS:
        warnings.append(_front_end_warning(engine, *front_end))
    if not on_harness and not engine_unseen:
        warnings.extend(_below_measured_load(engine, regime.concurrency, scope))
    if not bands:
        warnings.append("no error bands committed (run python benchmarks/accuracy.py --write)")
    return Confidence(bands, warnings)


def _regime_bands(regime: Regime, metrics: tuple[str, ...], outside: bool) -> dict[str, ErrorBand]:
    """The committed band of each metric for the regime's GPU (fitted or not), engine, load and TP; ``outside``:
    the calibration never measured the GPU, the model or the engine (then the held-out band)."""
    key = {
        "gpu": "fitted" if has_fitted_profile(regime.gpu) else "prior",
        "engine": regime.engine,
        "load": load_level(regime.concurrency),
        "tp": tp_group(regime.tp),
    }
    return {m: b for m in metrics if (b := _lookup(m, key, outside)) is not None}


def _profile_warnings(gpu: str) -> list[str]:
    """A GPU without an end-to-end fit: measured kernels only, or priors only."""
    if has_fitted_profile(gpu):
        return []
    if has_measured_kernels(gpu):
        return [f"{gpu}: kernel parameters measured (profiles/kernels/{gpu}.yaml), no end-to-end fit"]
    return [f"{gpu} has no fitted kernel profile: priors only"]


def _unseen_warning(unseen: list[str], scope: dict[str, Any], held_out: bool) -> str:
    """The GPU and/or model the serving data never measured, and where the error band comes from instead."""
    measured = f"serving runs of {', '.join(scope.get('models', []))} on {', '.join(scope.get('gpus', []))}"
    if held_out:
        return (
            f"{' and '.join(unseen)} never measured under load (calibrated on {measured}): the "
            "error band is infercast's error on published serving runs of other GPUs and models, "
            "none of them fitted (benchmarks/heldout_silicon.md)"
        )
    return (
        f"{' and '.join(unseen)} never measured under load: the error band comes from {measured} "
        "and may understate the error here"
    )


def _engine_unseen_warning(engine: str, scope: dict[str, Any], held_out: bool) -> str:
    """An engine (release) the serving data never measured: where its overheads come from, and its band."""
    shared = fitted_as(engine)
    overheads = (
        f"its per-step overheads are priors, its per-request ones {shared}'s fitted values"
        if shared != engine and shared in scope.get("engines", [])
        else "its overheads are priors"
    )
    band = (
        "; the error band is infercast's error on published serving runs outside its calibration "
        "(benchmarks/heldout_silicon.md)"
        if held_out
        else ""
    )
    return f"engine {engine} was never measured under load: {overheads}{band}"


def _scenario_warnings(regime: Regime, scope: dict[str, Any]) -> list[str]:
    """A parallel layout, a model family or an attention kind outside the calibration data."""
    warnings = []
    tp, ep, pp, attention_dp = regime.tp, regime.ep, regime.pp, regime.attention_dp
    if tp not in scope.get("tp", [tp]) or ep > 1 or pp > 1 or attention_dp > 1:
        seen = ", ".join(map(str, scope.get("tp", [])))
        extra = {"ep": ep, "pp": pp, "attention-dp": attention_dp}
        layout = " / ".join([f"tp {tp}", *(f"{k} {v}" for k, v in extra.items() if v > 1)])
        warnings.append(f"{layout} is outside the calibrated parallelism (tp {seen})")
    if regime.moe or regime.mla:
        warnings.append("MoE / MLA models were not in the calibration data (dense GQA models only)")
    if regime.attention not in CALIBRATED_ATTENTION and regime.attention != "MLA":
        warnings.append(f"{regime.attention} attention was not in the calibration data (dense GQA / MHA models only)")
    return warnings


def _unseen(scope: dict[str, Any], gpu: str | None, model: str | None) -> list[str]:
    """The GPU and the model of a prediction that the serving calibration data never measured."""
    out = []
    if gpu is not None and scope.get("gpus") and gpu not in scope["gpus"]:
        out.append(f"GPU {gpu}")
    if model is not None and scope.get("models") and model not in scope["models"]:
        out.append(f"model {model}")
    return out


def _harness_bands(harness: dict[str, Any], metrics: tuple[str, ...]) -> dict[str, ErrorBand]:
    """The torch engine's bands: its harness fit's leave-one-model-out errors (prefill and TTFT rows for TTFT,
    decode steps and TPOT loops for TPOT)."""
    rows = harness.get("held_out", {}).get("bands", {})
    regime = {"engine": str(harness.get("engine")), "data": "harness static batches, one model left out"}
    return {
        m: ErrorBand(m, rows[m]["typical"], rows[m]["p90"], rows[m]["points"], regime) for m in metrics if m in rows
    }


def rate_limits(engine: str) -> dict[str, float]:
    """The most each rate of ``RATE_NAMES`` may reach per server and stay inside the calibration data: RATE_MARGIN x
    the highest the engine served there (inf where the engine was never measured under load)."""
    measured = calibration_scope().get("rates", {}).get(engine, {})
    return {key: RATE_MARGIN * measured[key] if measured.get(key) else float("inf") for key in RATE_NAMES}


def within_rate_limits(engine: str, requests_per_s: np.ndarray, output_tokens_per_s: np.ndarray) -> np.ndarray:
    """Per row, whether both rates stay inside what the engine served in the calibration data (vectorised)."""
    limits = rate_limits(engine)
    return (requests_per_s <= limits["requests_per_s"]) & (output_tokens_per_s <= limits["output_tokens_per_s"])


def _rate_warnings(engine: str, rates: dict[str, float]) -> list[str]:
    """Rates above :func:`rate_limits` (none for an engine never measured under load: the engine warning covers
    it)."""
    out = []
    for key, limit in rate_limits(engine).items():
        value = rates.get(key)
        if value is not None and value > limit:
            top, gpus = limit / RATE_MARGIN, ", ".join(calibration_scope().get("gpus", []))
            out.append(
                f"{value:,.0f} {RATE_NAMES[key]} per server is above the most {engine} served in the "
                f"calibration data ({top:,.0f} on one {gpus} server): host-side limits the cost model does "
                "not price bound those runs, so TTFT may be far too low and throughput too high"
            )
    return out


def _front_end_warning(engine: str, busy: float, token_s: float) -> str:
    """The API server's front-end sets the run's latencies: what it sustains, and what that was fitted on (when the
    run used the engine's fitted time per token)."""
    fitted_on = ""
    if token_s == (fitted_engine_values().get(engine) or {}).get("stream_token_s"):
        versions = load_fit().get("engines", {}).get(engine, {}).get("versions", [])
        gpus = calibration_scope().get("gpus", [])
        fitted_on = f", fitted on {engine} {', '.join(versions)} runs on {', '.join(gpus)}" if versions and gpus else ""
    return (
        f"the API server's front-end binds: busy {busy:.0%} of the run at {1 / token_s:,.0f} streamed tokens/s "
        f"per server ({1e6 * token_s:.0f} us per token{fitted_on}); requests and first tokens wait behind other "
        "streams' tokens there, not on the GPUs. A release or host whose server streams faster would see a far "
        "lower TTFT and more throughput (--stream-token-us sets the front-end: 0 takes it away)"
    )


def _below_measured_load(engine: str, concurrency: int, scope: dict[str, Any]) -> list[str]:
    """A load below the fewest clients the engine was measured at: its per-request time was fitted on closed
    loops whose clients arrive together (waves), which a lone request does not see; where that fit put the time
    on the largest value it tried, the warning says so."""
    span = scope.get("concurrency", {}).get(engine)
    if not span or concurrency >= span[0]:
        return []
    fit = load_fit().get("engines", {}).get(engine, {})
    name = f"{engine}:request_overhead_s"
    fitted = (fitted_engine_values().get(engine) or {}).get("request_overhead_s")
    prior = fit.get("priors", {}).get(name)
    top = name in fit.get("at_edge", []) and fitted is not None and prior is not None and fitted > prior
    edge = (
        f"; its fixed part ({1e3 * fitted:.0f} ms) is the largest value that fit tried, a stand-in for what "
        "the simulator does not model there"
        if top and fitted is not None
        else ""
    )
    plural = "s" if concurrency != 1 else ""
    return [
        f"{concurrency} concurrent request{plural} is below the {span[0]}-{span[1]} clients {engine} was "
        f"measured at under load: its per-request time was fitted there, on clients arriving together{edge}"
    ]


def band_columns(dep: Deployment, batch: np.ndarray) -> dict[str, np.ndarray]:
    """Typical relative error of TTFT and TPOT for a sweep group (one deployment), per row by its load level
    (vectorised: one lookup per level, then a select on the batch sizes); NaN where no band was committed."""
    out = {}
    for metric in ("ttft", "tpot"):
        per_level = []
        for level in ("light", "medium", "heavy"):
            concurrency = {"light": 1, "medium": 32, "heavy": 128}[level]
            regime = Regime(
                dep.hardware.id,
                dep.engine.id,
                tp=dep.tp,
                ep=dep.ep,
                pp=dep.pp,
                attention_dp=dep.attention_dp,
                concurrency=concurrency,
                model=dep.model.id,
            )
            c = confidence(regime, metrics=(metric,))
            band = c.bands.get(metric)
            per_level.append(band.typical if band else np.nan)
        levels = [batch <= LOAD_LEVELS[0][0], batch <= LOAD_LEVELS[1][0]]
        out[f"{metric}_error"] = np.select(levels, per_level[:2], per_level[2])
    return out
