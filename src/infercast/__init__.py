"""infercast: predict, simulate and measure how large language models perform when served.

Public API (imported lazily so ``import infercast`` stays fast)::

    infercast.predict(model, gpu, input_len=..., output_len=..., ...)   -> Prediction
    infercast.sweep(models=..., gpus=..., ...)                           -> pandas.DataFrame
    infercast.plan(model, gpus, slo=..., rate=..., input_len=..., ...)    -> PlanResult (cheapest deployment)
    infercast.simulate(SimulationConfig(...)) or simulate(model, gpu, ...) -> SimulationResult
    infercast.memory_budget(model, gpu, ...)                            -> MemoryBudget
    infercast.get_model / get_hardware / list_models / list_hardware    catalogs
    infercast.Models, infercast.Hardware, infercast.ServingModel, infercast.show   (tutorial-style API)
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infercast.analysis.scenario import Prediction
    from infercast.cost.profile import CostProfile
    from infercast.memory import MemoryBudget
    from infercast.specs.deployment import Deployment
    from infercast.specs.engine import EngineSpec
    from infercast.specs.hardware import HardwareSpec
    from infercast.specs.model import ModelSpec

_EXPORTS: dict[str, tuple[str, str]] = {
    "Prediction": ("infercast.analysis.scenario", "Prediction"),
    "sweep": ("infercast.analysis.sweep", "sweep"),
    "simulate": ("infercast.sim.api", "simulate"),
    "SimulationResult": ("infercast.sim.api", "SimulationResult"),
    "PlanResult": ("infercast.plan.result", "PlanResult"),
    "PlanRequest": ("infercast.plan.request", "PlanRequest"),
    "SimulationConfig": ("infercast.sim.config", "SimulationConfig"),
    "EngineConfig": ("infercast.sim.config", "EngineConfig"),
    "ClusterConfig": ("infercast.sim.config", "ClusterConfig"),
    "ObserveConfig": ("infercast.sim.config", "ObserveConfig"),
    "DisaggConfig": ("infercast.sim.config", "DisaggConfig"),
    "WorkloadSpec": ("infercast.sim.workload", "WorkloadSpec"),
    "MemoryBudget": ("infercast.memory", "MemoryBudget"),
    "get_model": ("infercast.specs.catalog", "get_model"),
    "get_hardware": ("infercast.specs.catalog", "get_hardware"),
    "list_models": ("infercast.specs.catalog", "list_models"),
    "list_hardware": ("infercast.specs.catalog", "list_hardware"),
    "load_hardware": ("infercast.specs.catalog", "load_hardware"),
    "ModelSpec": ("infercast.specs.model", "ModelSpec"),
    "HardwareSpec": ("infercast.specs.hardware", "HardwareSpec"),
    "Deployment": ("infercast.specs.deployment", "Deployment"),
    "StepBatch": ("infercast.cost.batch", "StepBatch"),
    "StepCostModel": ("infercast.cost.step", "StepCostModel"),
    "InfercastError": ("infercast.errors", "InfercastError"),
    "Models": ("infercast.tutorial_api", "Models"),
    "Hardware": ("infercast.tutorial_api", "Hardware"),
    "ServingModel": ("infercast.tutorial_api", "ServingModel"),
}
_MODULES = {"show": "infercast.show", "plan": "infercast.plan"}
"""Modules as attributes; ``infercast.plan`` is also callable (:func:`infercast.plan.planner.plan`)."""

_FUNCTIONS = ("predict", "memory_budget")
"""Defined below: they take the public keywords and build the typed inputs (a :class:`Deployment`) at the edge."""

__all__ = sorted([*_EXPORTS, *_MODULES, *_FUNCTIONS, "__version__"])


def _installed_version() -> str:
    """The installed distribution's version (pyproject's, via the package metadata), so ``--version`` never lags."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("infercast")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _installed_version()
    elif name in _EXPORTS:
        module, attr = _EXPORTS[name]
        value = getattr(import_module(module), attr)
    elif name in _MODULES:
        value = import_module(_MODULES[name])
    else:
        raise AttributeError(f"module 'infercast' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


def predict(
    model: str | ModelSpec | Deployment,
    gpu: str | HardwareSpec | None = None,
    *,
    input_len: int,
    output_len: int,
    batch: int = 1,
    tp: int = 1,
    ep: int = 1,
    precision: str | None = None,
    kv_precision: str | None = None,
    engine: str | EngineSpec = "vllm",
    chunk_size: int | None = None,
    profile: CostProfile | None = None,
    strict: bool = True,
    pp: int = 1,
    attention_dp: int = 1,
    stream_token_s: float | None = None,
) -> Prediction:
    """Predict one scenario: ``batch`` requests of ``input_len`` prompt tokens and ``output_len`` outputs, on
    ``model`` x ``gpu`` with this layout, formats and engine (or on a :class:`Deployment`, then without ``gpu``,
    ``tp``, ``ep``, ``pp``, ``attention_dp``, ``precision``, ``kv_precision``, ``engine``). See
    :func:`infercast.analysis.scenario.predict` for the rest of the keywords and what comes back."""
    from infercast.analysis import scenario

    dep = scenario.as_deployment(
        model,
        gpu,
        tp=tp,
        ep=ep,
        precision=precision,
        kv_precision=kv_precision,
        engine=engine,
        pp=pp,
        attention_dp=attention_dp,
    )
    return scenario.predict(
        dep,
        input_len=input_len,
        output_len=output_len,
        batch=batch,
        chunk_size=chunk_size,
        profile=profile,
        strict=strict,
        stream_token_s=stream_token_s,
    )


def memory_budget(
    model: str | ModelSpec | Deployment,
    gpu: str | HardwareSpec | None = None,
    *,
    tp: int = 1,
    ep: int = 1,
    precision: str | None = None,
    kv_precision: str | None = None,
    engine: str | EngineSpec = "vllm",
    pp: int = 1,
    attention_dp: int = 1,
    context: int | None = None,
    concurrency: int | None = None,
    gpu_memory_utilization: float | None = None,
    block_size: int | None = None,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
) -> MemoryBudget:
    """Per-GPU memory budget of ``model`` on ``gpu`` with this layout, formats and engine; ``model`` may be a
    resolved :class:`Deployment` (then ``gpu``/``tp``/... are taken from it). See
    :func:`infercast.memory.memory_budget` for the load and run keywords."""
    from infercast import memory
    from infercast.analysis import scenario

    dep = scenario.as_deployment(
        model,
        gpu,
        tp=tp,
        ep=ep,
        precision=precision,
        kv_precision=kv_precision,
        engine=engine,
        pp=pp,
        attention_dp=attention_dp,
    )
    return memory.memory_budget(
        dep,
        context=context,
        concurrency=concurrency,
        gpu_memory_utilization=gpu_memory_utilization,
        block_size=block_size,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
    )
