"""``validate-sim``: the same workload through the real engine (wall clock) and through the simulator set up
as that engine (CPU hardware spec and fitted profile), side by side, with relative errors and latency CDFs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from infercast.cost.batch import StepBatch
from infercast.cost.profile import CostProfile
from infercast.cost.step import cost_model
from infercast.harness.engine.clock import WallClock
from infercast.harness.engine.cpu import fit_params, fit_profile, scaled_profile, speed_factor, sweep_from_steps
from infercast.harness.engine.loadgen import EngineRun, replay
from infercast.harness.engine.runtime import Engine
from infercast.harness.engine.sim_twin import HarnessEngineConfig, deployment, simulate_engine
from infercast.harness.torch_model import TransformerModel
from infercast.sim.api import SimulationResult
from infercast.sim.metrics import request_metrics
from infercast.sim.workload import Workload
from infercast.specs.hardware import HardwareSpec

LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
STATS = ("mean", "p50", "p90", "p99")
SCALARS = ("request_throughput_req_s", "output_throughput_tok_s", "preemptions", "prefix_cache_hit_rate")


def build_model(config: HarnessEngineConfig, *, seed: int = 0, device: str = "cpu") -> TransformerModel:
    """The engine's model: ``config.model`` cut to ``config.num_layers`` layers, random weights."""
    return TransformerModel(
        config.model, num_layers=config.num_layers, precision=config.precision, device=device, seed=seed
    )


def make_engine(model: TransformerModel, config: HarnessEngineConfig) -> Engine:
    return Engine(
        model,
        scheduler=config.scheduler,
        num_blocks=config.num_blocks,
        block_size=config.block_size,
        max_num_seqs=config.max_num_seqs,
        max_num_batched_tokens=config.max_num_batched_tokens,
        prefix_caching=config.prefix_caching,
    )


@dataclass
class Validation:
    """Measured (engine) vs simulated metrics of one workload, and the runs behind them."""

    rows: list[dict[str, Any]]
    measured: EngineRun
    simulated: SimulationResult
    info: dict[str, Any] = field(default_factory=dict)
    replayed_rows: list[dict[str, Any]] = field(default_factory=list)
    """The simulator with a profile fitted to this run's own step times: what is left is the error of the
    scheduling and queueing dynamics alone (the step-time model's error, e.g. a machine slower than when it
    was calibrated, is taken out). A diagnostic, not a prediction."""

    def error(self, metric: str, stat: str) -> float:
        """Relative error of the simulation: simulated / measured - 1."""
        for row in self.rows:
            if row["metric"] == metric and row["stat"] == stat:
                return float(row["rel_error"])
        raise KeyError((metric, stat))

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "replayed_rows": self.replayed_rows, **self.info}


def compare_runs(measured: Mapping[str, Any], simulated: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows ``metric, stat, measured, simulated, rel_error`` (simulated / measured - 1; NaN when measured is 0)."""
    rows = []

    def add(metric: str, stat: str, m: float, s: float) -> None:
        rel = s / m - 1.0 if m else float("nan")
        rows.append({"metric": metric, "stat": stat, "measured": float(m), "simulated": float(s), "rel_error": rel})

    for metric in LATENCIES:
        for stat in STATS:
            add(metric, stat, measured[metric][stat], simulated[metric][stat])
    for key in SCALARS:
        add(key, "", measured[key], simulated[key])
    return rows


def validate_sim(
    model: TransformerModel,
    config: HarnessEngineConfig,
    hardware: HardwareSpec,
    profile: CostProfile,
    work: Workload,
    *,
    threads: int = 2,
    warmup_requests: int = 4,
    probe: bool = True,
    probe_requests: int = 8,
) -> Validation:
    """Run ``work`` on the engine in real time and in the simulator; compare (see module docstring).

    A few requests of the workload's shape run first, unmeasured, so one-time costs (allocator growth,
    kernel selection for new shapes) do not land on the measured requests. With ``probe``, the first
    ``probe_requests`` requests are then served again, by two clients and then all at once (small and full
    batches), and the profile's step times scaled by how much slower or faster those served steps ran than it
    says (:func:`~infercast.harness.engine.cpu.speed_factor`;
    ~1 on an idle machine).
    """
    torch.set_num_threads(threads)
    if warmup_requests:
        warm = work.head(min(warmup_requests, len(work)))
        replay(make_engine(model, config), _all_at_once(warm), WallClock())
    factor = 1.0
    if probe:
        head = work.head(min(probe_requests, len(work)))
        served = []
        for load in ({"concurrency": 2}, {"offline": True}):  # small decode batches, then full ones and prefills
            probe_engine = make_engine(model, config)
            replay(probe_engine, _reloaded(head, **load), WallClock())
            served.extend(probe_engine.steps)
        factor = speed_factor(sweep_from_steps(served), config, hardware, profile)
        profile = scaled_profile(profile, factor)
    load_before = os.getloadavg()
    engine = make_engine(model, config)
    run = replay(engine, work, WallClock())
    load_after = os.getloadavg()
    sim = simulate_engine(config, hardware, profile, work)
    step_time = cost_model(deployment(config, hardware), profile).step_time
    run_steps = engine.steps
    steps = sweep_from_steps(run_steps)
    ratio = steps.seconds / step_time(StepBatch(steps.features), fast=True)
    info = {
        "scheduler": config.scheduler,
        "requests": len(work),
        "workload": work.name,
        "threads": threads,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "engine_duration_s": run.summary["duration_s"],
        "sim_duration_s": sim.summary["duration_s"],
        "speed_factor": factor,
        "steps": len(run_steps),
        "step_time_ratio_p50": float(np.median(ratio)),
        "step_time_ratio_mean": float(np.mean(ratio)),
        "step_time_ratio_sum": float(steps.seconds.sum() / (steps.seconds / ratio).sum()),
    }
    out = Validation(compare_runs(run.summary, sim.summary), run, sim, info)
    if len(run_steps) >= 2 * len(fit_params(hardware)):
        own, _ = fit_profile(steps, config, hardware, balance=True, match_total=True)
        out.replayed_rows = compare_runs(run.summary, simulate_engine(config, hardware, own, work).summary)
    return out


def _all_at_once(work: Workload) -> Workload:
    return _reloaded(work, offline=True)


def _reloaded(work: Workload, **load: Any) -> Workload:
    """``work``'s requests under another load (``offline=True``, ``concurrency=N``)."""
    from infercast.sim.workload import WorkloadSpec

    return WorkloadSpec(workload=work, **load).build()


def plot_cdfs(validations: dict[str, Validation], path: str | Path) -> Path:
    """One panel per latency (TTFT, TPOT, E2E), measured (solid) and simulated (dashed) CDFs per label."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    names = ("TTFT", "TPOT", "E2E")
    for k, (label, v) in enumerate(validations.items()):
        color = f"C{k % 10}"
        m = v.measured.ttft_tpot_e2e()
        tb = v.simulated.table
        s = request_metrics(tb.arrival, tb.first_token, tb.finish, tb.output)
        for ax, name, mv, sv in zip(axes, names, m, s, strict=True):
            for values, style, who in ((mv, "-", "engine"), (sv, "--", "simulator")):
                x = np.sort(values[np.isfinite(values)]) * 1e3
                if x.size:
                    ax.step(
                        x, np.arange(1, x.size + 1) / x.size, style, color=color, where="post", label=f"{label} {who}"
                    )
            ax.set_xlabel(f"{name} (ms)")
            ax.set_title(f"{name} CDF")
            ax.grid(alpha=0.3)
    axes[0].set_ylabel("fraction of requests")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
