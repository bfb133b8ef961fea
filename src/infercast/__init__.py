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
from typing import Any

_EXPORTS: dict[str, tuple[str, str]] = {
    "predict": ("infercast.analysis.scenario", "predict"),
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
    "memory_budget": ("infercast.memory", "memory_budget"),
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

__all__ = sorted([*_EXPORTS, *_MODULES, "__version__"])


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
