"""Calibration steps taken from the engine itself: its step loop run on calibration workloads.

Why not only a synthetic grid of shapes (:func:`infercast.harness.engine.cpu.step_sweep`): a grid times the forward
pass of idealised batches (equal decode contexts, contiguous block tables, no scheduler), while a served step
also plans, books blocks, and pads decode attention to the batch's longest context. On this 2-core machine a
profile fitted to the grid priced the engine's own steps 2-17 % too fast in sum (README, "Step-time model").
Here the engine serves closed-loop and offline workloads drawn like the validation's (different seeds), under
every scheduler, and every step it logs (duration from before planning to after sampling, and the simulator's
features) is a calibration point: the steps the simulator will be asked to price.

Runs are interleaved (round by round, load by load, scheduler by scheduler), so a drift of the machine's
speed spreads over every kind of step instead of landing on one; :func:`held_out` fits one round and scores the
others, which is the error a validation run (new arrivals, same distributions) can expect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from infercast.cost.batch import F, StepBatch
from infercast.cost.profile import CostProfile
from infercast.cost.step import StepCostModel
from infercast.harness.engine.clock import WallClock
from infercast.harness.engine.cpu import (
    Sweep,
    cpu_hardware,
    fit_profile,
    measure_peaks,
    provenance,
    step_sweep,
    sweep_from_steps,
)
from infercast.harness.engine.loadgen import replay
from infercast.harness.engine.runtime import Engine
from infercast.harness.engine.sim_twin import HarnessEngineConfig, deployment
from infercast.harness.torch_model import TransformerModel
from infercast.sim.workload import Workload, WorkloadSpec
from infercast.specs.hardware import HardwareSpec

SCHEDULERS = ("prefill-first", "chunked")
LOADS: tuple[tuple[str, int | None, int], ...] = (("concurrency", 2, 8), ("concurrency", 6, 18), ("offline", None, 32))
"""(kind, clients, requests): a light closed loop (decode batches of 1-2), a busy one (5-6 and prefills joining
them), and everything at once (full batches, queued prompts, preemptions): the batch compositions the
validation's light, near-saturation and overloaded Poisson loads produce."""


@dataclass(frozen=True)
class RequestShape:
    """How calibration requests are drawn (the validation workload's distributions; WorkloadSpec syntax)."""

    input_len: str = "uniform:64,256"
    output_len: str = "uniform:16,64"
    prefix: tuple[int, int] | None = (4, 64)

    def workload(self, kind: str, clients: int | None, n: int, seed: int) -> Workload:
        load: dict[str, Any] = {"concurrency": clients} if kind == "concurrency" else {"offline": True}
        return WorkloadSpec(
            input_len=self.input_len, output_len=self.output_len, num_requests=n, prefix=self.prefix, seed=seed, **load
        ).build()


@dataclass
class EngineSteps:
    """Logged steps of the calibration runs, with the round (0, 1, ...) each came from."""

    sweep: Sweep
    rounds: np.ndarray
    runs: list[dict[str, Any]]


def _engine(model: TransformerModel, config: HarnessEngineConfig) -> Engine:
    return Engine(
        model,
        scheduler=config.scheduler,
        num_blocks=config.num_blocks,
        block_size=config.block_size,
        max_num_seqs=config.max_num_seqs,
        max_num_batched_tokens=config.max_num_batched_tokens,
        prefix_caching=config.prefix_caching,
    )


def engine_steps(
    model: TransformerModel,
    config: HarnessEngineConfig,
    *,
    rounds: int = 2,
    seed: int = 1000,
    threads: int = 1,
    shape: RequestShape | None = None,
    loads: tuple[tuple[str, int | None, int], ...] = LOADS,
    schedulers: tuple[str, ...] = SCHEDULERS,
) -> EngineSteps:
    """Serve ``loads`` x ``schedulers`` ``rounds`` times on the engine (wall clock); every step logged.

    ``seed`` + round gives each round its own requests (validation workloads use other seeds). One unmeasured
    offline run comes first, so first-call costs (allocator growth, kernel selection) are not calibrated."""
    torch.set_num_threads(threads)
    shape = shape or RequestShape()
    warm = shape.workload("offline", None, 4, seed - 1)
    replay(_engine(model, replace(config, scheduler=schedulers[0])), warm, WallClock())
    steps: list[Any] = []
    tags: list[int] = []
    runs: list[dict[str, Any]] = []
    for r in range(rounds):
        for kind, clients, n in loads:
            for scheduler in schedulers:
                engine = _engine(model, replace(config, scheduler=scheduler))
                replay(engine, shape.workload(kind, clients, n, seed + r), WallClock())
                steps.extend(engine.steps)
                tags.extend([r] * len(engine.steps))
                name = kind if clients is None else f"{kind} {clients}"
                runs.append(
                    {"round": r, "scheduler": scheduler, "load": name, "requests": n, "steps": len(engine.steps)}
                )
    return EngineSteps(sweep_from_steps(steps), np.array(tags), runs)


def kinds(features: np.ndarray) -> dict[str, np.ndarray]:
    """Masks of decode-only, prefill-only and mixed steps (columns of a feature matrix)."""
    pre = features[F["prefill_tokens"]] > 0
    dec = features[F["decode_tokens"]] > 0
    return {"decode": dec & ~pre, "prefill": pre & ~dec, "mixed": pre & dec}


def errors(predicted: np.ndarray, sweep: Sweep) -> dict[str, float]:
    """Per step: mean and max |predicted / measured - 1|; per kind of step (and all): the error of the summed
    time (what TTFT and TPOT add up), which single-step timing noise (±15 % here) mostly cancels from."""
    rel = predicted / sweep.seconds - 1.0
    out = {
        "mean_abs_rel_error": float(np.mean(np.abs(rel))),
        "max_abs_rel_error": float(np.max(np.abs(rel))),
        "total_rel_error": float(predicted.sum() / sweep.seconds.sum() - 1.0),
        "steps": int(rel.size),
    }
    for name, mask in kinds(sweep.features).items():
        if mask.any():
            out[f"{name}_total_rel_error"] = float(predicted[mask].sum() / sweep.seconds[mask].sum() - 1.0)
    return out


def subset(sweep: Sweep, mask: np.ndarray) -> Sweep:
    return Sweep(sweep.features[:, mask], sweep.seconds[mask], [], sweep.info)


def held_out(
    data: EngineSteps, fit: Callable[[Sweep], Any], predict: Callable[[Any, Sweep], np.ndarray]
) -> dict[str, float]:
    """Fit on every round but one, score the steps of that one; averaged over the rounds left out (with the
    worst per-step error kept as the max)."""
    scores = []
    for r in np.unique(data.rounds):
        test = data.rounds == r
        model = fit(subset(data.sweep, ~test))
        scores.append(errors(predict(model, subset(data.sweep, test)), subset(data.sweep, test)))
    keys = set.intersection(*(set(s) for s in scores))
    out = {k: float(np.mean([s[k] for s in scores])) for k in keys if k != "max_abs_rel_error"}
    out["max_abs_rel_error"] = float(max(s["max_abs_rel_error"] for s in scores))
    out["folds"] = len(scores)
    return out


def calibrate(
    model: TransformerModel,
    config: HarnessEngineConfig,
    *,
    threads: int = 2,
    repeats: int = 5,
    rounds: int = 2,
    hardware: HardwareSpec | None = None,
) -> tuple[HardwareSpec, CostProfile, dict[str, Any], dict[str, Any]]:
    """Peaks; the engine's own steps on calibration workloads
    (:mod:`infercast.harness.engine.cpu_steps`, ``rounds`` rounds); the fit to them, with its error on rounds held out;
    and, for comparison, the synthetic grid (:func:`step_sweep`) and how far a fit to it is from the served
    steps. Returns ``(spec, profile, peaks, fit record)``.

    ``hardware``: the catalog spec of the GPU the model runs on; its datasheet peaks stand in for measured ones
    (``peaks`` then names the device), and the same fit sets the efficiencies and overheads."""
    if hardware is None:
        peaks = measure_peaks(threads, repeats)
        hardware = cpu_hardware(peaks)
    else:
        peaks = {**provenance(), "device": hardware.id, "device_name": hardware.name}
    dep = deployment(config, hardware)
    data = engine_steps(model, config, rounds=rounds, threads=threads)
    grid = step_sweep(model, config, repeats=repeats, threads=threads)
    sweep = data.sweep
    sweep.info.update({**provenance(), "threads": threads, "rounds": rounds})

    def refit(s: Sweep) -> CostProfile:
        return fit_profile(s, config, hardware, balance=True, match_total=True)[0]

    def predict(profile: CostProfile, s: Sweep) -> np.ndarray:
        return StepCostModel(dep, profile).step_time(StepBatch(s.features))

    profile, _ = fit_profile(sweep, config, hardware, balance=True, match_total=True)
    grid_profile, grid_stats = fit_profile(grid, config, hardware)
    fit = {
        **sweep.info,
        **errors(predict(profile, sweep), sweep),
        "model": config.model_cut.id,
        "layers": config.num_layers,
        "precision": config.precision,
        "points": len(sweep.seconds),
        "held_out": held_out(data, refit, predict) if rounds > 1 else {},
        "grid_fit": {
            "points": len(grid.seconds),
            **grid_stats,
            "on_engine_steps": errors(predict(grid_profile, sweep), sweep),
        },
        "runs": data.runs,
        "grid": [{"step": label, "seconds": float(s)} for label, s in zip(grid.labels, grid.seconds, strict=True)],
    }
    return hardware, profile, peaks, fit
