"""Physical consistency of the cost model over every GPU in the catalog (issue 36, part 4).

The fitted kernel tables and end-to-end fits must not contradict the hardware: two GPUs built on one die at one
clock price a compute-bound prefill alike, every efficiency is a fraction of a peak, a step never gets faster by
adding work, and from one GPU to another a compute-bound (memory-bound) step speeds up by about the datasheet's
ratio of tensor peaks (HBM bandwidths).
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache

import numpy as np
import pytest

from infercast.cost.batch import StepBatch
from infercast.cost.profile import MOE_PARAMS, load_profile
from infercast.cost.step import StepCostModel
from infercast.specs.catalog import get_hardware, list_hardware
from infercast.specs.deployment import Deployment

ENGINES = ("vllm", "sglang", "trtllm")
GPUS = [h.id for h in list_hardware()]
REFERENCE = "h100-sxm"
SAME_DIE = [("h100-sxm", "h200"), ("b200", "gb200")]
"""GPUs on one die at one tensor clock: GH100 (H100 SXM 80 GB HBM3, H200 141 GB HBM3e) and GB100 (HGX B200,
GB200's Blackwell GPU). Their prefill steps, bound by the same tensor cores, must agree within 5 %."""
SAME_DIE_TOLERANCE = 0.05
RATIO_TOLERANCE = 0.15
"""A step's speed-up over the reference GPU within the datasheet ratio x (1 +- this)."""

PRIORS_ONLY = "no measured kernel tables: architecture priors, which carry no activation quantisation or clock limit"
KNOWN_OFF = {
    "l40s": "measured: its GEMM tables top out at 0.64-0.78 of the datasheet peak (the 350 W board does not hold the "
    "boost clock the peak assumes)",
    "gb200": "pooled with B200 (same GB100 die, one tensor rate: within 5 %), while its datasheet peak is 11 % above "
    "B200's; its own tables run 4-9 % faster than B200's on TensorRT-LLM and SGLang",
    **dict.fromkeys(("t4", "l4", "a10g", "a100-40gb", "h100-pcie", "mi300x", "mi325x", "rtx-4090"), PRIORS_ONLY),
}
"""GPUs whose ratio to the reference leaves the datasheet's +-15 % for a stated reason: a failure there is
reported as an expected failure (a pass, once fixed, shows as XPASS); anywhere else it fails."""

PREFILL = StepBatch.from_items([(8192, 0)] * 2)
"""Compute-bound: two 8k-token prompts of an 8B model (about 2.7e14 FLOPs), whole-prompt chunks."""
DECODE = StepBatch.from_items((), [1024])
"""Memory-bound: one sequence's decode step of a 405B model (405 GB of weights streamed at 8 bits per weight)."""


def _precisions(gpu: str) -> list[str]:
    peaks = get_hardware(gpu).peak_flops
    return [p for p in ("bf16", "fp8") if p in peaks] or ["fp16"]


CASES = [(g, e, p) for g in GPUS for e in ENGINES for p in _precisions(g)]


@cache
def _model(model: str, gpu: str, engine: str, precision: str) -> StepCostModel:
    return StepCostModel(Deployment.resolve(model, gpu, precision=precision, engine=engine))


@cache
def _prefill_s(gpu: str, engine: str, precision: str) -> float:
    return float(_model("llama-3.1-8b", gpu, engine, precision).step_time(PREFILL)[0])


@cache
def _decode_s(gpu: str, engine: str) -> float:
    precision = "fp8" if "fp8" in get_hardware(gpu).peak_flops else "int8"
    return float(_model("llama-3.1-405b", gpu, engine, precision).step_time(DECODE)[0])


@pytest.mark.parametrize("pair", SAME_DIE, ids="-".join)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_same_die_gpus_price_a_compute_bound_prefill_alike(pair, engine, precision):
    a, b = (_prefill_s(g, engine, precision) for g in pair)
    assert abs(b / a - 1.0) <= SAME_DIE_TOLERANCE, f"{pair[1]} / {pair[0]} prefill = {b / a:.3f}"


@pytest.mark.parametrize(("gpu", "engine", "precision"), CASES)
def test_compute_bound_speedup_follows_the_datasheet_peak(gpu, engine, precision):
    ref = REFERENCE if precision in get_hardware(REFERENCE).peak_flops else None
    if ref is None or gpu == ref:
        pytest.skip("the reference GPU has no such peak")
    dep = _model("llama-3.1-8b", gpu, engine, precision).dep
    datasheet = dep.hardware.peak(dep.compute_key) / get_hardware(ref).peak(dep.compute_key)
    speedup = _prefill_s(ref, engine, precision) / _prefill_s(gpu, engine, precision)
    _check_ratio(gpu, speedup, datasheet)


@pytest.mark.parametrize("gpu", [g for g in GPUS if g != REFERENCE])
@pytest.mark.parametrize("engine", ENGINES)
def test_memory_bound_speedup_follows_the_datasheet_bandwidth(gpu, engine):
    datasheet = get_hardware(gpu).memory.bandwidth_bytes_s / get_hardware(REFERENCE).memory.bandwidth_bytes_s
    speedup = _decode_s(REFERENCE, engine) / _decode_s(gpu, engine)
    _check_ratio(gpu, speedup, datasheet)


def _check_ratio(gpu: str, speedup: float, datasheet: float) -> None:
    inside = abs(speedup / datasheet - 1.0) <= RATIO_TOLERANCE
    if not inside and gpu in KNOWN_OFF:
        pytest.xfail(f"{speedup / datasheet:.2f} of the datasheet ratio: {KNOWN_OFF[gpu]}")
    assert inside, f"speed-up {speedup:.2f}, datasheet {datasheet:.2f}"


def _efficiencies(gpu: str, engine: str) -> dict[str, float]:
    hw = get_hardware(gpu)
    p = load_profile(gpu, hw.architecture, engine)
    out = {f"gemm_eff_max.{k}": v for k, v in p.gemm_eff_max.items()}
    for name in MOE_PARAMS:
        if "eff" in name:
            out.update({f"{name}.{k}": v for k, v in getattr(p, name).items()})
    out.update(
        {f.name: getattr(p, f.name) for f in fields(p) if f.name.endswith("efficiency") and f.name not in MOE_PARAMS}
    )
    if not p.gdn_prefill_efficiency:  # no gated-DeltaNet table imported: the attention efficiency applies
        out.pop("gdn_prefill_efficiency")
    return out


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("engine", ENGINES)
def test_every_fitted_efficiency_is_a_fraction_of_a_peak(gpu, engine):
    bad = {k: v for k, v in _efficiencies(gpu, engine).items() if not 0.0 < v <= 1.0}
    assert not bad


@pytest.mark.parametrize(("gpu", "engine", "precision"), CASES)
def test_step_time_never_falls_with_more_tokens_or_context(gpu, engine, precision):
    model = _model("llama-3.1-8b", gpu, engine, precision)
    chunks = [16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    prefill = np.concatenate([model.step_time(StepBatch.from_items([(c, 0)])) for c in chunks])
    assert (np.diff(prefill) >= 0).all(), dict(zip(chunks, prefill, strict=True))
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    decode = np.concatenate([model.step_time(StepBatch.from_items((), [2048] * b)) for b in batches])
    assert (np.diff(decode) >= 0).all(), dict(zip(batches, decode, strict=True))
    contexts = [1, 128, 1024, 4096, 16384, 65536, 131072]
    longer = np.concatenate([model.step_time(StepBatch.from_items((), [c] * 32)) for c in contexts])
    assert (np.diff(longer) >= 0).all(), dict(zip(contexts, longer, strict=True))
    cached = np.concatenate([model.step_time(StepBatch.from_items([(512, c)])) for c in contexts])
    assert (np.diff(cached) >= 0).all(), dict(zip(contexts, cached, strict=True))
