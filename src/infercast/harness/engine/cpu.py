"""CPU calibration: a ``cpu`` hardware spec from measured peaks, and a cost profile fitted to step times of
this engine, so the simulator can predict the engine on this machine.

* :func:`measure_peaks` — best-of-N large GEMMs (fp32, bf16) and a large copy: the machine's dense peak
  FLOP/s and memory bandwidth as this process sees them (the *measured* peaks play the datasheet's role).
* :func:`fit_profile` — least squares on log step time over the cost model's efficiency and overhead
  parameters (:mod:`infercast.cost.step`): the same functional form the simulator uses for GPUs, so the
  simulator prices a CPU step through the same code path as a GPU step.
* :func:`~infercast.harness.engine.cpu_steps.calibrate` — fits that form to the engine's own served steps
  (:mod:`infercast.harness.engine.cpu_steps`), scores it on a round held out, and records the synthetic grid
  (:func:`step_sweep`, decode batches, prefill chunks, mixed steps) and a fit to it for comparison. Given a
  GPU's catalog spec (``hardware``), it does the same for the engine running on that GPU
  (``benchmarks/validate_sim_gpu.py``).
* :func:`speed_factor` — served steps timed just before a validation run against the profile: how much
  slower or faster the machine is now.

Everything records where and when it was measured, and the load average at the time (the machine may be
shared: timings taken under load describe a slower machine).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from infercast.cost.batch import FEATURES, StepBatch
from infercast.cost.batch import F as F_INDEX
from infercast.cost.profile import CostProfile
from infercast.cost.step import StepCostModel
from infercast.errors import InfercastError
from infercast.files import load_yaml
from infercast.harness.engine.paged import PagedKV, PagedRunner, SeqChunk
from infercast.harness.engine.sim_twin import HarnessEngineConfig, deployment
from infercast.harness.torch_model import TransformerModel
from infercast.specs.hardware import HardwareSpec, LinkSpec, MemorySpec

FIT_PARAMS = (
    "gemm_eff_max.{key}",
    "gemm_m_half.{key}",
    "hbm_efficiency",
    "attn_prefill_efficiency",
    "attn_decode_efficiency",
    "kernel_overhead_eager_s",
    "step_overhead_s",
    "seq_overhead_s",
)
"""Parameters the CPU fit sets; ``{key}`` is the GEMM format (bf16 or fp32). The rest keep the values of
:func:`cpu_base_profile` (no graphs, no links, no per-request overhead: the engine is in-process)."""
GPU_FIT_PARAMS = (*FIT_PARAMS, "eager_layer_host_s")
"""On a GPU the fit also sets a host floor per layer under every step: the engine launches each kernel from one
Python process, so its steps take 34-48 ms on an H100 whatever the batch, with the GPU idle between launches
(Llama-3.1-8B, 32 layers: ~1.1 ms per layer; ``benchmarks/results/served_steps_h100.txt``). On a CPU the host
does the work itself, and the floor stays out of the fit."""
HOST_FLOOR_OFF = 1e-6
"""Seconds per layer of the host-floor fit's start out of the way: 32 us a step for a 32-layer model, below any
step's GPU time, so that fit is the one without a floor (the floor has no gradient there and stays)."""


def fit_params(hardware: HardwareSpec) -> tuple[str, ...]:
    """The parameters a fit on ``hardware`` sets: :data:`GPU_FIT_PARAMS` on a GPU, :data:`FIT_PARAMS` on the CPU."""
    return FIT_PARAMS if hardware.id == "cpu" else GPU_FIT_PARAMS


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _ram_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8e9


def _best(fn: Any, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure_peaks(threads: int, repeats: int = 5, *, n: int = 2048, copy_mib: int = 256) -> dict[str, Any]:
    """Dense GEMM FLOP/s (fp32, bf16; ``n``^3) and copy bandwidth (``copy_mib`` MiB, beyond the caches) of this
    CPU with ``threads`` threads, best of ``repeats``."""
    torch.set_num_threads(threads)
    out: dict[str, Any] = {}
    for key, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        a = torch.randn(n, n, dtype=dtype)
        b = torch.randn(n, n, dtype=dtype)
        out[key] = 2 * n**3 / _best(lambda a=a, b=b: a @ b, repeats)
    src = torch.empty(copy_mib * 256 * 1024, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    out["bandwidth_bytes_s"] = 2 * src.numel() * 4 / _best(lambda: dst.copy_(src), repeats)
    out.update(provenance())
    out.update(threads=threads, gemm_n=n, copy_mib=copy_mib)
    return out


def provenance() -> dict[str, Any]:
    """Where and when: host, CPU model, date (UTC), load average (1/5/15 min) at the time."""
    return {
        "host": platform.node(),
        "cpu": _cpu_name(),
        "cores": os.cpu_count(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "torch": str(torch.__version__),
    }


def cpu_hardware(peaks: dict[str, Any]) -> HardwareSpec:
    """The ``cpu`` accelerator spec: measured peaks in place of a datasheet."""
    where = (
        f"measured on {peaks.get('host', '?')} ({peaks.get('cpu', '?')}), {peaks.get('date', '?')}, "
        f"{peaks.get('threads', '?')} threads, load average {peaks.get('loadavg', '?')}"
    )
    no_link = LinkSpec(name="none (single CPU)", bandwidth_bytes_s=0.0)
    return HardwareSpec(
        id="cpu",
        name=f"CPU: {peaks.get('cpu', 'unknown')} x{peaks.get('threads', '?')} threads",
        vendor="cpu",
        architecture="cpu",
        memory=MemorySpec(
            capacity_bytes=_ram_bytes(),
            capacity_as_sold="host RAM",
            bandwidth_bytes_s=float(peaks["bandwidth_bytes_s"]),
            type="DRAM",
        ),
        peak_flops={"fp32": float(peaks["fp32"]), "bf16": float(peaks["bf16"])},
        l2_bytes=0.0,
        sm_count=int(peaks.get("threads", 1)),
        interconnect=no_link,
        host_link=LinkSpec(name="host memory", bandwidth_bytes_s=float(peaks["bandwidth_bytes_s"])),
        max_gpus_per_node=1,
        tdp_w=1.0,
        price_per_hour_usd=0.0,
        sources={
            "peak_flops": f"best of repeated n^3 torch.matmul per format (n = {peaks.get('gemm_n', '?')}), {where}",
            "memory": f"best of repeated {peaks.get('copy_mib', '?')} MiB tensor copies (read + write bytes), {where}",
            "tdp_w": "not known for a virtual machine's cores; placeholder, used only by energy estimates",
        },
    )


def cpu_base_profile() -> CostProfile:
    """Starting values of the fit, not measurements: every parameter a CPU step's time depends on is refitted
    (:data:`FIT_PARAMS`; the GEMM pair for the model's compute format). The rest are zero by construction
    here (no CUDA graphs, no links, requests in-process, per-kernel fixed times folded into the fitted
    overheads) or unused (the GEMM pair of the other format)."""
    keys = ("fp32", "bf16", "fp16")
    return CostProfile(
        hardware="cpu",
        engine="infercast-engine",
        gemm_eff_max=dict.fromkeys(keys, 0.5),
        gemm_m_half=dict.fromkeys(keys, 4.0),
        hbm_efficiency=0.5,
        attn_prefill_efficiency=0.2,
        attn_decode_efficiency=0.3,
        link_efficiency=1.0,
        allreduce_latency_s=0.0,
        kernel_overhead_graph_s=0.0,
        kernel_overhead_eager_s=1e-5,
        step_overhead_s=1e-3,
        seq_overhead_s=2e-5,
        graph_max_tokens=0.0,
        gemm_m_floor=1.0,
        request_overhead_s=0.0,
        decode_attn_group_reads=0.0,
        provenance={"*": "prior: starting point of the CPU fit"},
    )


# ----- step sweep ---------------------------------------------------------------------------------------------
DECODE_BATCHES = (1, 2, 4, 8, 16)
DECODE_CONTEXTS = (128, 512)
PREFILL_CHUNKS = (16, 64, 128, 256)
PREFILL_CACHED = (0, 256)
MIXED = ((64, 4), (128, 8), (256, 8), (32, 16))


def sweep_points() -> list[tuple[list[tuple[int, int]], list[int]]]:
    """Step shapes of the sweep: ``(prefill (chunk, cached) list, decode contexts)``."""
    pts: list[tuple[list[tuple[int, int]], list[int]]] = []
    for n in DECODE_BATCHES:
        for ctx in DECODE_CONTEXTS:
            pts.append(([], [ctx] * n))
    for c in PREFILL_CHUNKS:
        for c0 in PREFILL_CACHED:
            pts.append(([(c, c0)], []))
    pts.append(([(64, 0)] * 4, []))
    for c, n in MIXED:
        pts.append(([(c, 128)], [300] * n))
    return pts


@dataclass
class Sweep:
    """Measured step times and their cost-model features (columns of a StepBatch)."""

    features: np.ndarray  # (NUM_FEATURES, N)
    seconds: np.ndarray  # (N,)
    labels: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def step_sweep(
    model: TransformerModel,
    config: HarnessEngineConfig,
    *,
    repeats: int = 5,
    threads: int = 2,
    points: list[tuple[list[tuple[int, int]], list[int]]] | None = None,
) -> Sweep:
    """Time the engine's forward step (batch build, forward, greedy sampling) over ``points`` (default
    :func:`sweep_points`). Repeats go round the whole grid, so a machine whose speed drifts (other users)
    slows every shape alike instead of a few; each shape keeps its median."""
    torch.set_num_threads(threads)
    bs = config.block_size
    points = sweep_points() if points is None else points
    longest = max(max([c + c0 for c, c0 in p] + d + [1]) for p, d in points)
    per_seq = -(-(longest + 1) // bs)
    most = max(len(p) + len(d) for p, d in points)
    kv = PagedKV(model, per_seq * most, bs)
    runner = PagedRunner(model, kv)
    tables = [list(range(s * per_seq, (s + 1) * per_seq)) for s in range(most)]
    rng = np.random.default_rng(0)
    runs, cols, labels = [], [], []
    for pre, dec in points:
        chunks = [
            SeqChunk(rng.integers(0, model.spec.vocab_size, c).tolist(), c0, tables[k], True)
            for k, (c, c0) in enumerate(pre)
        ]
        decs = [SeqChunk([1], ctx - 1, tables[len(pre) + k], True) for k, ctx in enumerate(dec)]

        def run(chunks: list[SeqChunk] = chunks, decs: list[SeqChunk] = decs) -> None:
            runner.step(chunks, decs).argmax(dim=-1).tolist()

        run()  # first call of a shape: allocations and kernel selection, not timed
        runs.append(run)
        batch = StepBatch.from_items(pre, dec, window=model.window, prefill_samples=len(pre))
        cols.append(batch.x[:, 0])
        labels.append(f"prefill={pre} decode={len(dec)}x{dec[0] if dec else 0}")
    times: list[list[float]] = [[] for _ in points]
    for _ in range(repeats):
        for k, run in enumerate(runs):
            t = time.perf_counter()
            run()
            times[k].append(time.perf_counter() - t)
    info = {**provenance(), "threads": threads, "repeats": repeats}
    return Sweep(np.array(cols).T, np.array([statistics.median(t) for t in times]), labels, info)


def speed_factor(steps: Sweep, config: HarnessEngineConfig, hardware: HardwareSpec, profile: CostProfile) -> float:
    """How much slower (> 1) or faster the machine is now than ``profile`` says: summed measured over summed
    predicted time of ``steps``, served steps just timed (a few requests, seconds before a validation run).

    Served steps, not a synthetic probe: the profile is fitted to served steps (scheduling, padded decode
    attention), and a sum over ~100 of them is steadier than a few synthetic shapes (single steps vary by
    about ±15 % here). A machine shared with other jobs changes speed between calibration and a run; on an idle
    one this is ~1."""
    predicted = StepCostModel(deployment(config, hardware), profile).step_time(StepBatch(steps.features))
    return float(steps.seconds.sum() / predicted.sum())


def scaled_profile(profile: CostProfile, factor: float, why: str = "speed probe before the run") -> CostProfile:
    """``profile`` with every step time multiplied by ``factor`` (efficiencies / factor, overheads x factor)."""
    flat = profile.flat()
    values = {k: v / factor for k, v in flat.items() if "eff" in k}
    values.update({k: flat[k] * factor for k in ("kernel_overhead_eager_s", "step_overhead_s", "seq_overhead_s")})
    return profile.with_values(
        values, f"{profile.provenance.get('hbm_efficiency', 'fit')}; times x {factor:.3f} ({why})"
    )


def sweep_from_steps(steps: list[Any], info: dict[str, Any] | None = None) -> Sweep:
    """The steps an engine run logged (:class:`~infercast.harness.engine.runtime.StepLog`) as a sweep: their
    features and wall-clock durations."""
    features = np.array([[s.features[name] for name in FEATURES] for s in steps]).T
    return Sweep(features, np.array([s.end - s.start for s in steps]), [], dict(info or {}))


def fit_profile(
    sweep: Sweep,
    config: HarnessEngineConfig,
    hardware: HardwareSpec,
    *,
    balance: bool = False,
    match_total: bool = False,
) -> tuple[CostProfile, dict[str, float]]:
    """Least-squares fit (log time) of :func:`fit_params`; returns the profile and the fit's error stats.

    ``balance``: weight decode-only, prefill-only and mixed steps so that each kind counts as much in all as
    the others (engine runs log ten decode steps per prefill step; the prefill and mixed ones set TTFT).
    ``match_total``: then scale every step time by one factor so the fitted steps' summed time is the measured
    one (the fit on log time matches typical steps; noisy served steps have a longer mean than typical)."""
    from scipy.optimize import least_squares

    dep = deployment(config, hardware)
    key = dep.compute_key
    names = [p.format(key=key) for p in fit_params(hardware)]
    base = cpu_base_profile()
    flat = base.flat()
    x0 = np.log([flat[n] if n != "eager_layer_host_s" else HOST_FLOOR_OFF for n in names])
    lo = np.log([1e-3 if "eff" in n else 1e-2 if "m_half" in n else 1e-8 for n in names])
    hi = np.log([1.0 if "eff" in n else 4096.0 if "m_half" in n else 0.5 for n in names])
    batch = StepBatch(sweep.features)
    target = np.log(sweep.seconds)
    weight = np.sqrt(_kind_weights(sweep.features)) if balance else np.ones_like(target)

    def predict(logp: np.ndarray) -> np.ndarray:
        prof = base.with_values(dict(zip(names, np.exp(logp).tolist(), strict=True)), "fit")
        return StepCostModel(dep, prof).step_time(batch, fast=True)

    def solve(start: np.ndarray) -> Any:  # scipy's OptimizeResult
        return least_squares(lambda p: weight * (np.log(predict(p)) - target), np.clip(start, lo, hi), bounds=(lo, hi))

    res = solve(x0)
    if "eager_layer_host_s" in names:
        # a host floor below every step's GPU time has no gradient and stays where it starts: fit once with it
        # out of the way (above) and once from where it binds for the typical step, and keep the better fit
        # (a H100 run of 2026-11-27 started it at 0.1 ms per layer and left it there)
        k = names.index("eager_layer_host_s")
        bound = x0.copy()
        bound[k] = np.log(float(np.median(sweep.seconds)) / dep.model.num_layers)
        other = solve(bound)
        res = other if other.cost < res.cost else res
    values = dict(zip(names, np.exp(res.x).tolist(), strict=True))
    src = (
        f"fitted to {len(sweep.seconds)} engine step times, {sweep.info.get('date')}, "
        f"load average {sweep.info.get('loadavg')}"
    )
    profile = base.with_values(values, src)
    predicted = predict(res.x)
    scale = 1.0
    if match_total:
        # log-time residuals centre on the typical step; single-step noise is skewed (a step now and then is
        # held up), so the typical step is shorter than the mean one. TTFT and TPOT add step times up: scale
        # the profile so the summed time of the fitted steps is the measured one.
        scale = float(sweep.seconds.sum() / predicted.sum())
        profile = scaled_profile(profile, scale, "summed time matched")
        predicted = predicted * scale
    rel = predicted / sweep.seconds - 1.0
    stats = {
        "mean_abs_rel_error": float(np.mean(np.abs(rel))),
        "max_abs_rel_error": float(np.max(np.abs(rel))),
        "total_scale": scale,
    }
    return profile, stats


def _kind_weights(features: np.ndarray) -> np.ndarray:
    """Per step: 1 / (steps of its kind: decode-only, prefill-only, mixed), scaled to mean 1."""
    pre = features[F_INDEX["prefill_tokens"]] > 0
    dec = features[F_INDEX["decode_tokens"]] > 0
    kind = np.where(pre & dec, 2, np.where(pre, 1, 0))
    counts = np.bincount(kind, minlength=3).astype(float)
    w = 1.0 / counts[kind]
    return w * (w.size / w.sum())


# ----- files -------------------------------------------------------------------------------------------------
def save_calibration(path: str | Path, peaks: dict[str, Any], profile: CostProfile, fit: dict[str, Any]) -> Path:
    """Write peaks, fitted parameters and provenance as one YAML file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "hardware": "cpu",
        "peaks": peaks,
        "profile": {k: float(v) for k, v in profile.flat().items()},
        "fit": fit,
    }
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False))
    tmp.replace(path)
    return path


def load_calibration(path: str | Path) -> tuple[HardwareSpec, CostProfile, dict[str, Any]]:
    """Read a file written by :func:`save_calibration`: the ``cpu`` spec, its profile, and the fit record. The file
    is read by the user-file rules (:func:`~infercast.files.load_yaml`); anything malformed is one line."""
    data = load_yaml(path, "calibration")
    if (
        not isinstance(data, dict)
        or data.get("hardware") != "cpu"
        or not isinstance(data.get("peaks"), dict)
        or not isinstance(data.get("profile"), dict)
    ):
        raise InfercastError(
            f"{path} is not a CPU calibration (needs hardware: cpu, peaks, profile)", field="calibration"
        )
    fit = data["fit"] if isinstance(data.get("fit"), dict) else {}
    src = f"fitted: {path} ({fit.get('date', data['peaks'].get('date', '?'))})"
    try:
        return cpu_hardware(data["peaks"]), cpu_base_profile().with_values(data["profile"], src), fit
    except InfercastError as exc:
        raise InfercastError(f"{path}: {exc}", field="calibration") from None
    except (KeyError, TypeError, ValueError) as exc:  # a missing peak, a wrong type (pydantic's errors are ValueErrors)
        detail = " ".join(str(exc).split())[:200]
        raise InfercastError(f"{path} is not a usable CPU calibration ({detail})", field="calibration") from None
