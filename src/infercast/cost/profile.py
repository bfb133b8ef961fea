"""Efficiency and overhead parameters of the step cost model, with where each value came from.

Values resolve in layers: the ``ideal`` engine (pure roofline, all efficiencies 1, no overheads) stands
alone; otherwise architecture/engine priors (``profiles/defaults.yaml``), then kernel parameters and
collective latency tables measured per GPU (``profiles/kernels/<gpu>.yaml``, written by
``infercast calibrate --from aiconfigurator``), then fitted engine parameters shared by all GPUs
(``profiles/engine_load.yaml``), then an engine release's own parameters fitted on the public silicon rows
(``profiles/silicon_fit.yaml``), then end-to-end fitted values per GPU (``profiles/<gpu>.yaml``; its optional
``engines`` section overrides engine parameters for that GPU only). ``provenance`` records, per parameter,
``measured: ...``, ``fitted: ...`` or ``prior: ...``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from infercast.cost.curves import Curve, lerp_curves
from infercast.cost.ring import ring_share
from infercast.errors import InfercastError
from infercast.files import parse_package_yaml

SAME_RATE = {"bf16": ("bf16", "fp16"), "fp16": ("bf16", "fp16"), "fp8": ("fp8", "int8"), "int8": ("fp8", "int8")}
"""Compute formats whose GEMMs share a tensor-core rate (and so one fitted efficiency curve)."""

SAME_DIE = {"h200": "h100-sxm", "gb200": "b200"}
"""GPU -> the GPU whose die it shares at the same tensor peak (specs/data/hardware.yaml: H200 is GH100 with 141 GB
of HBM3e, H100 SXM's compute; GB200's Blackwell GPU is B200's GB100). An end-to-end fit ties their compute-bound
parameters (:data:`COMPUTE_BOUND_PARAMS`) so that the same tensor cores price a prefill alike; memory-side ones
stay per GPU."""
COMPUTE_BOUND_PARAMS = ("gemm_eff_max", "gemm_m_half", "attn_prefill_efficiency")

KERNEL_PARAMS = (
    "hbm_efficiency",
    "attn_prefill_efficiency",
    "attn_decode_efficiency",
    "link_efficiency",
    "allreduce_latency_s",
)
KERNEL_LATENCY_PARAMS = ("gemm_latency_s", "attn_prefill_latency_s", "attn_decode_latency_s", "attn_decode_seq_s")
GDN_PARAMS = ("gdn_chunk_s", "gdn_prefill_efficiency")
"""Gated-DeltaNet chunked prefill, measured from the kernel tables' ``linear_attention`` timings where imported."""
"""Fixed time of one kernel of a kind beyond its roofline time (ramp-up, tail wave, split-KV combine),
measured from kernel tables (``profiles/kernels/<gpu>.yaml``); 0 where no table was imported. Not part of the
end-to-end fit (``KERNEL_PARAMS``), which runs on top of them."""
MOE_PARAMS = ("moe_eff_max", "moe_m_half", "moe_hbm_efficiency", "moe_latency_s", "moe_pair_passes")
"""Routed-expert (fused MoE) kernel parameters per compute key, measured from fused-MoE kernel tables
(``profiles/kernels/<gpu>.yaml``; see :func:`CostProfile.moe_params`). A key without them: the routed experts
run as dense GEMMs (``gemm_*``, ``hbm_efficiency``, ``gemm_latency_s``). Not part of the end-to-end fit."""
MOE_WIDTH_HALF = "moe_width_half"
"""The fused-MoE fits' optional sixth parameter (``CostProfile.moe_width_half``)."""
MOE_PAIR_ELEMENT_BYTES = 2.0
"""Bytes per element of the routed pairs' activations that ``moe_pair_passes`` counts passes over: the fused-MoE
tables' 16-bit hidden states. The fit (calibrate/kernel_fit.py) and the step model (cost/step.py) both take
it from here, so a scheme whose activation format is not 16-bit still gets the passes as measured."""
MOE_SAME_KERNEL = {"bf16": ("bf16", "fp16"), "fp16": ("bf16", "fp16")}
"""Compute keys served by one fused-MoE kernel fit (16-bit experts: bf16 and fp16 run the same kernels)."""
ENGINE_PARAMS = (
    "kernel_overhead_graph_s",
    "kernel_overhead_eager_s",
    "step_overhead_s",
    "seq_overhead_s",
    "graph_max_tokens",
    "request_overhead_s",
    "request_jitter_s",
    "decode_attn_group_reads",
    "layer_overhead_graph_s",
    "layer_overhead_eager_s",
    "decode_attn_cta_bytes_s",
    "eager_layer_host_s",
    "stream_token_s",
    "allreduce_token_s",
)


@dataclass(frozen=True)
class CostProfile:
    """All tunable parameters of :mod:`infercast.cost` for one GPU x engine."""

    hardware: str
    engine: str
    gemm_eff_max: dict[str, float]
    gemm_m_half: dict[str, float]
    hbm_efficiency: float
    attn_prefill_efficiency: float
    attn_decode_efficiency: float
    link_efficiency: float
    allreduce_latency_s: float
    """alpha: latency of one all-reduce hop over the scale-up links; an all-reduce over N GPUs without a measured
    curve takes (N - 1)·alpha. Per all-reduce hop, i.e. two ring steps (a ring all-reduce is 2(N - 1) steps), so a
    gather or all-to-all (N - 1 steps) takes (N - 1)·alpha/2; the scale-out network's ``latency_s`` is per step
    (see profiles/defaults.yaml, cost/ring.py)."""
    kernel_overhead_graph_s: float
    kernel_overhead_eager_s: float
    step_overhead_s: float
    seq_overhead_s: float
    graph_max_tokens: float
    gemm_m_floor: float = 16.0
    """GEMMs with fewer rows than this run at the efficiency of this many (tensor-core tiles are at least
    16 rows tall): a GEMV is memory-bound, not starved of compute."""
    request_overhead_s: float = 0.0
    """Per-request latency outside the engine loop (API server, tokenisation), added to TTFT."""
    request_jitter_s: float = 0.0
    """Mean of a further per-request latency that varies from request to request, exponentially distributed
    (HTTP, the API server's event loop, tokenisation): the simulator draws it per request; analytic predictions
    add its mean. With equal prompt and output lengths it is what keeps closed-loop clients from staying in
    lockstep forever (see :func:`infercast.sim.state.intake_draws`)."""
    decode_attn_group_reads: float = 0.0
    """0: decode attention reads each KV head once (GQA-aware kernels); 1: once per query head."""
    layer_overhead_graph_s: float = 0.0
    """Time per decoder layer beyond the operator table's kernels, in a step replayed as a CUDA graph: the
    extra small kernels of an engine that runs its layers unfused (infercast's harness); 0 for serving engines,
    whose kernels the table counts."""
    layer_overhead_eager_s: float = 0.0
    """The same for a step launched eagerly, where it is mostly the host dispatching the extra ops."""
    decode_attn_cta_bytes_s: float = 0.0
    """Bytes per second one thread block of decode attention streams, for kernels that split the work only
    over sequences x KV heads (no split-KV / flash-decoding): with fewer blocks than the GPU needs to saturate
    HBM, the blocks, not the bandwidth, bind. 0: split-KV kernels (FlashInfer, FlashAttention-3, XQA)."""
    eager_layer_host_s: float = 0.0
    """Host time per decoder layer of a step that runs eagerly (outside CUDA graphs), with or without prompt
    tokens: the CPU launches ahead of the GPU, so such a step takes at least ``layers x`` this, whatever its GPU time
    (TensorRT-LLM's PyTorch backend: its closed-loop mixed steps at TP 4-8 take ~0.65 ms per layer for a 1k or a
    2k prompt alike, benchmarks/mixed_steps.py; no preset sets it, as its closed-loop TTFT then cross-validates
    worse: docs/accuracy-notes.md; 0: the GPU always binds)."""
    stream_token_s: float = 0.0
    """Serial front-end time per streamed output token (the API server's process detokenises and sends each one):
    one first-in-first-out queue per server that new requests also pass through, so past its rate requests wait
    before they reach the engine and every token reaches its client late (0: the front-end never binds)."""
    allreduce_token_s: float = 0.0
    """Time per token per tensor-parallel all-reduce beyond the collectives' measured curves, whatever the hidden
    size: what an engine's TP > 1 steps take in its served runs and in none of the kernels its tables time (vLLM
    0.14: fitted on the public silicon rows, ``profiles/silicon_fit.yaml``; 0: the curves alone)."""
    gdn_chunk_s: float = 0.0
    """Serial time per 64-token chunk of one sequence in a gated-DeltaNet layer's chunked prefill kernel: the
    chunks of a sequence run one after another (each carries the recurrent state to the next), so a lone long
    prompt takes chunks x this whatever its FLOPs; measured from the kernel tables (0: its roofline only)."""
    gdn_prefill_efficiency: float = 0.0
    """Fraction of the 16-bit peak that kernel reaches on its FLOPs when enough sequences run side by side (0: the
    attention prefill efficiency)."""
    gemm_latency_s: float = 0.0
    """Fixed time per GEMM kernel beyond max(compute, memory) (see KERNEL_LATENCY_PARAMS)."""
    attn_prefill_latency_s: float = 0.0
    attn_decode_latency_s: float = 0.0
    attn_decode_seq_s: float = 0.0
    """Decode attention time per sequence per layer (per-request scheduling inside the kernel)."""
    moe_eff_max: dict[str, float] = field(default_factory=dict)
    """Routed experts' grouped GEMMs: fraction of the peak at many rows per expert (per compute key)."""
    moe_m_half: dict[str, float] = field(default_factory=dict)
    """Rows per expert (T·k/E, at least ``gemm_m_floor``) at which the grouped GEMM reaches half of moe_eff_max."""
    moe_hbm_efficiency: dict[str, float] = field(default_factory=dict)
    """Fraction of HBM bandwidth the fused-MoE kernels stream expert weights and routed activations at."""
    moe_latency_s: dict[str, float] = field(default_factory=dict)
    """Fixed time per routed-expert GEMM kernel (two per MoE layer)."""
    moe_pair_passes: dict[str, float] = field(default_factory=dict)
    """Passes over every routed token-expert pair's activations (T·k·(hidden + expert width) 16-bit elements per
    layer, at moe_hbm_efficiency): sorting, gathers, intermediate buffers and the weighted sum."""
    moe_width_half: dict[str, float] = field(default_factory=dict)
    """Expert columns per rank (the intermediate width over its tensor-parallel split) at which the grouped GEMM
    reaches half its compute ceiling: narrow shards run slower (efficiency x w / (w + moe_width_half)). 0 (or absent)
    where the kernel's table shows no such slowdown (calibrate.kernel_fit.WIDTH_GAIN)."""
    gemm_act_quant_bytes: dict[str, float] = field(default_factory=dict)
    """Per compute key: bytes per input activation element, at the datasheet HBM rate, of the activation
    quantisation pass an 8-bit GEMM runs before it (unfused dynamic quantisation: read 16-bit, write 8-bit,
    find the scale); fitted with the GEMM curve to the kernel tables (measure/aiconfigurator_fit.py). Absent: 0."""
    provenance: dict[str, str] = field(default_factory=dict)
    collectives: dict[str, dict[int, Curve]] = field(default_factory=dict)
    """Measured latency curves (seconds vs message bytes) per collective ('all_reduce', 'all_gather',
    'alltoall') and group size, for this GPU and engine; collectives without one use the ring formula."""

    @property
    def mean_request_overhead_s(self) -> float:
        """Mean per-request latency outside the engine loop: the fixed part plus the varying part's mean."""
        return self.request_overhead_s + self.request_jitter_s

    def collective_curve(self, kind: str, ranks: int) -> Curve | None:
        """The measured curve of ``kind`` for ``ranks`` GPUs in one scale-up domain: exact where measured,
        interpolated between two measured sizes, scaled from the largest beyond them; None without a table."""
        table = self.collectives.get(kind)
        if not table or ranks < 2:
            return None
        if ranks in table:
            return table[ranks]
        sizes = sorted(table)
        below = [n for n in sizes if n < ranks]
        above = [n for n in sizes if n > ranks]
        if below and above:
            lo, hi = below[-1], above[0]
            return lerp_curves(
                table[lo],
                table[hi],
                (ranks - lo) / (hi - lo),
                f"{table[lo].source}; interpolated between {lo} and {hi} GPUs",
            )
        ref = sizes[-1] if below else sizes[0]
        # outside the measured sizes: scaled by the ring's bytes per GPU, (N-1)/N of the message (x2 for an
        # all-reduce, which cancels in the ratio)
        factor = ring_share(kind, ranks) / ring_share(kind, ref)
        return table[ref].scaled(factor, f"{table[ref].source}; scaled from {ref} to {ranks} GPUs by (N-1)/N")

    def gemm_params(self, key: str) -> tuple[float, float]:
        """(eff_max, m_half) for GEMMs computing in ``key``."""
        if key not in self.gemm_eff_max:
            raise InfercastError(f"no GEMM efficiency for {key} on {self.hardware}", field="precision")
        return self.gemm_eff_max[key], self.gemm_m_half[key]

    def moe_params(self, key: str) -> tuple[float, float, float, float, float] | None:
        """(eff_max, m_half, hbm_efficiency, latency_s, pair_passes) of the fused-MoE kernels computing in
        ``key``, or None where no fused-MoE table was fitted (the experts then run as dense GEMMs)."""
        if not all(key in getattr(self, name) for name in MOE_PARAMS):
            return None
        eff, half, hbm, latency, passes = (float(getattr(self, name)[key]) for name in MOE_PARAMS)
        return eff, half, hbm, latency, passes

    def with_values(self, values: dict[str, float], provenance: str) -> CostProfile:
        """Copy with parameters replaced; keys are names or 'gemm_eff_max.bf16' style paths."""
        flat: dict[str, Any] = {}
        eff, half = dict(self.gemm_eff_max), dict(self.gemm_m_half)
        moe: dict[str, Any] = {name: dict(getattr(self, name)) for name in (*MOE_PARAMS, MOE_WIDTH_HALF)}
        quant = dict(self.gemm_act_quant_bytes)
        prov = dict(self.provenance)
        for key, value in values.items():
            value = checked_parameter(key, value)
            if key.split(".", 1)[0] in moe and "." in key:
                group, fmt = key.split(".", 1)
                for alias in MOE_SAME_KERNEL.get(fmt, (fmt,)):
                    moe[group][alias] = float(value)
                    prov[f"{group}.{alias}"] = provenance
            elif key.startswith("gemm_act_quant_bytes."):
                quant[key.split(".", 1)[1]] = float(value)
            elif key.startswith(("gemm_eff_max.", "gemm_m_half.")):
                group, fmt = key.split(".", 1)
                target = eff if group == "gemm_eff_max" else half
                # bf16 and fp16 run on the same tensor cores at the same rate: one parameter serves both
                for alias in SAME_RATE.get(fmt, (fmt,)):
                    target[alias] = float(value)
                    prov[f"{group}.{alias}"] = provenance
            elif key in KERNEL_PARAMS or key in ENGINE_PARAMS or key in KERNEL_LATENCY_PARAMS or key in GDN_PARAMS:
                flat[key] = float(value)
            else:
                raise InfercastError(f"unknown cost parameter {key!r}", field="profile")
            prov[key] = provenance
        return replace(
            self, gemm_eff_max=eff, gemm_m_half=half, gemm_act_quant_bytes=quant, provenance=prov, **moe, **flat
        )

    def flat(self) -> dict[str, float]:
        """Every numeric parameter as 'name' or 'gemm_eff_max.key' -> value."""
        out: dict[str, float] = {}
        for key, value in self.gemm_eff_max.items():
            out[f"gemm_eff_max.{key}"] = value
        for key, value in self.gemm_m_half.items():
            out[f"gemm_m_half.{key}"] = value
        for f in fields(self):
            if f.name in KERNEL_PARAMS or f.name in ENGINE_PARAMS:
                out[f.name] = getattr(self, f.name)
        return out


UNBOUNDED_PARAMS = ("graph_max_tokens",)
"""Parameters that may be infinite (every step replayed as a CUDA graph)."""


def checked_parameter(key: str, value: Any) -> float:
    """``value`` as a float, refused unless it is a number >= 0 (> 0 for an efficiency) and finite (but for
    :data:`UNBOUNDED_PARAMS`): a negative time or a zero efficiency would silently switch a cost off or make
    one infinite."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InfercastError(f"{key} must be a number, got {value!r}", field="profile") from None
    base = key.split(".", 1)[0]
    efficiency = base.endswith(("efficiency", "_eff_max"))
    if math.isnan(number) or number < 0 or (efficiency and number == 0):
        allowed = "> 0 (a fraction of the peak)" if efficiency else ">= 0"
        raise InfercastError(f"{key} must be {allowed}, got {value!r}", field="profile")
    if math.isinf(number) and base not in UNBOUNDED_PARAMS:
        raise InfercastError(f"{key} must be finite, got {value!r}", field="profile")
    return number


def _read_yaml(name: str) -> dict[str, Any] | None:
    ref = resources.files("infercast.cost.profiles").joinpath(name)
    if not ref.is_file():
        return None
    return parse_package_yaml(ref.read_text())


@cache
def _engines_yaml() -> dict[str, Any]:
    """``engine_load.yaml`` as installed (read once per process)."""
    return _read_yaml("engine_load.yaml") or {}


def harness_fit() -> dict[str, Any]:
    """``engine_load.yaml``'s ``harness_fit``: the torch engine fitted to infercast's harness on real GPUs, with its
    error leaving one model out (calibrate/harness_fit.py); empty when never fitted."""
    return _engines_yaml().get("harness_fit") or {}


def load_fit() -> dict[str, Any]:
    """``engine_load.yaml``'s ``load_fit``: each serving engine's per-request parameters fitted on closed-loop runs
    (calibrate/load_fit.py), with the ones its grid search left on an edge; empty when never fitted."""
    return _engines_yaml().get("load_fit") or {}


def fitted_engine_values() -> dict[str, dict[str, Any]]:
    """``engine_load.yaml``'s fitted values per engine (shared by all GPUs); empty when never fitted."""
    return _engines_yaml().get("engines") or {}


@cache
def silicon_fit() -> dict[str, Any]:
    """``silicon_fit.yaml``: engine-release parameters fitted on the public silicon rows, with their errors left
    out by model and by GPU (benchmarks/allreduce_token_fit.py); empty when never fitted."""
    return _read_yaml("silicon_fit.yaml") or {}


@cache
def _defaults() -> dict[str, Any]:
    data = _read_yaml("defaults.yaml")
    assert data is not None
    return data


_overrides: dict[str, dict[str, Any]] = {}
_generation = [0]


def profile_generation() -> int:
    """Counter bumped whenever profile overrides change (lets callers invalidate compiled models)."""
    return _generation[0]


def set_profile_override(hardware_id: str, data: dict[str, Any] | None) -> None:
    """Use ``data`` (same layout as a profiles/<gpu>.yaml file) for a GPU in this process; None removes it."""
    if data is None:
        _overrides.pop(hardware_id, None)
    else:
        _overrides[hardware_id] = data
    _generation[0] += 1
    load_profile.cache_clear()
    has_fitted_profile.cache_clear()


_user_profiles: dict[str, list[tuple[str, dict[str, Any]]]] = {}
"""Profiles given with ``--profile FILE`` (:func:`use_profile_file`), per GPU: applied on top of the package's."""


def use_profile_file(path: str | Path) -> str:
    """Predict with a profile ``infercast calibrate`` wrote (the CLI's ``--profile FILE``): its fitted values go on
    top of the package's for that GPU (what it leaves out keeps the package's value), for this process. Returns
    the GPU id; a file that is not a profile, names an unknown GPU or holds a value out of range fails here, in
    one line naming the file."""
    from infercast.files import load_yaml
    from infercast.specs.catalog import get_hardware

    data = load_yaml(path, "profile")
    if not isinstance(data, dict) or not isinstance(data.get("hardware"), str):
        raise InfercastError(f"{path} is not a cost profile (needs a 'hardware' key naming the GPU)", field="profile")
    hw = get_hardware(data["hardware"])
    sections = {"kernels": data.get("kernels") or {}, **(data.get("engines") or {})}
    if not isinstance(data.get("engines") or {}, dict) or not all(isinstance(v, dict) for v in sections.values()):
        raise InfercastError(f"{path}: 'kernels' and each engine under 'engines' must be mappings", field="profile")
    for name, section in sections.items():
        try:
            values = _flatten(section)
            over = [k for k, v in values.items() if k.split(".", 1)[0].endswith(("efficiency", "_eff_max")) and v > 1]
            if over:
                raise InfercastError(
                    f"{over[0]} must be <= 1 (a fraction of the peak), got {values[over[0]]:g}", field="profile"
                )
            load_profile(hw.id, hw.architecture, "vllm", fitted=False).with_values(values, str(path))
        except InfercastError as exc:  # before ValueError, which it extends
            raise InfercastError(f"{path}: {name}: {exc.message}", field="profile") from None
        except (TypeError, ValueError):
            raise InfercastError(f"{path}: {name} holds a value that is not a number", field="profile") from None
    _user_profiles.setdefault(hw.id, []).append((str(path), data))
    _generation[0] += 1
    load_profile.cache_clear()
    has_fitted_profile.cache_clear()
    return hw.id


def clear_profile_files() -> None:
    """Forget every :func:`use_profile_file` (tests; a long-lived process switching profiles)."""
    _user_profiles.clear()
    _generation[0] += 1
    load_profile.cache_clear()
    has_fitted_profile.cache_clear()


def load_profile_file(path: str | Path) -> dict[str, Any]:
    """Read a fitted-profile YAML written by ``infercast calibrate``."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise InfercastError(f"no such file: {path}", field="profile") from None
    if not isinstance(data, dict) or "hardware" not in data:
        raise InfercastError(f"{path} is not a cost profile (needs a 'hardware' key)", field="profile")
    return data


@cache
def load_profile(
    hardware_id: str, architecture: str, engine: str, fitted: bool = True, measured: bool = True
) -> CostProfile:
    """Resolve the parameters for one GPU and engine (see module docstring). ``fitted=False``: without the
    end-to-end fits (priors and measured kernels: the base an end-to-end fit starts from); ``measured=False``
    also without the measured kernel profile (priors only)."""
    if engine == "ideal":
        return _ideal_profile(hardware_id)
    profile, eng = _prior_profile(hardware_id, architecture, engine)
    kernels = _measured_kernels(hardware_id) if measured else None
    if kernels:
        profile = _with_measured_kernels(profile, kernels, fitted)
    if not fitted:
        return profile
    fitted_key = str(eng.get("fitted_as", engine))  # a later release sharing another's fitted values
    profile = _with_package_fits(profile, fitted_key)
    return _with_user_fits(profile, fitted_key)


def _ideal_profile(hardware_id: str) -> CostProfile:
    """Engine 'ideal': datasheet peaks, every efficiency 1 and no overheads."""
    keys = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
    return CostProfile(
        hardware=hardware_id,
        engine="ideal",
        gemm_eff_max=dict.fromkeys(keys, 1.0),
        gemm_m_half=dict.fromkeys(keys, 0.0),
        hbm_efficiency=1.0,
        attn_prefill_efficiency=1.0,
        attn_decode_efficiency=1.0,
        link_efficiency=1.0,
        allreduce_latency_s=0.0,
        kernel_overhead_graph_s=0.0,
        kernel_overhead_eager_s=0.0,
        step_overhead_s=0.0,
        seq_overhead_s=0.0,
        graph_max_tokens=float("inf"),
        gemm_m_floor=1.0,
        request_overhead_s=0.0,
        decode_attn_group_reads=0.0,
        provenance={"*": "ideal: datasheet peaks, no overheads"},
    )


def _prior_profile(hardware_id: str, architecture: str, engine: str) -> tuple[CostProfile, dict[str, Any]]:
    """The priors of ``architecture`` (kernel parameters) and ``engine`` (engine parameters), each value's
    provenance naming its source; with the engine's own prior entry."""
    defaults = _defaults()
    arch = defaults["architectures"].get(architecture)
    if arch is None:
        raise InfercastError(
            f"no cost priors for architecture {architecture!r}; known: {', '.join(defaults['architectures'])}",
            field="gpu",
        )
    eng = defaults["engines"].get(engine)
    if eng is None:
        raise InfercastError(f"no cost priors for engine {engine!r}", field="engine")
    prov: dict[str, str] = {}
    arch_src = f"prior ({architecture}): {arch.get('source', '')}".strip()
    eng_src = f"prior ({engine}): {eng.get('source', '')}".strip()
    values: dict[str, Any] = {k: arch[k] for k in KERNEL_PARAMS}
    values.update({k: eng.get(k, 0.0) for k in ENGINE_PARAMS})
    for k in KERNEL_PARAMS:
        prov[k] = arch_src
    for k in ENGINE_PARAMS:
        prov[k] = eng_src
    values["gemm_m_floor"] = arch.get("gemm_m_floor", 16)
    prov["gemm_m_floor"] = arch_src
    eff = {k: float(v) for k, v in arch["gemm_eff_max"].items()}
    half = {k: float(v) for k, v in arch["gemm_m_half"].items()}
    for k in eff:
        prov[f"gemm_eff_max.{k}"] = arch_src
        prov[f"gemm_m_half.{k}"] = arch_src
    scalars: dict[str, Any] = {k: float(v) for k, v in values.items()}
    profile = CostProfile(
        hardware=hardware_id, engine=engine, gemm_eff_max=eff, gemm_m_half=half, provenance=prov, **scalars
    )
    return profile, eng


def _with_measured_kernels(profile: CostProfile, kernels: dict[str, Any], fitted: bool) -> CostProfile:
    """The GPU's measured kernel profile over the priors; with the fits, HBM streaming scaled by the end-to-end
    fits' rate over their kernel tables unless the GPU's own file sets ``hbm_efficiency``."""
    hardware_id = profile.hardware
    profile = _apply_measured(profile, kernels, profile.engine)
    own = (_overrides.get(hardware_id) or _gpu_profile_file(hardware_id) or {}).get("kernels", {})
    scale, donors = serving_stream_scale() if fitted and "hbm_efficiency" not in own else (1.0, ())
    if donors:
        profile = profile.with_values(
            {"hbm_efficiency": min(1.0, profile.hbm_efficiency * scale)},
            f"measured x {scale:.3f}: the end-to-end fits' streaming rate over their GPUs' kernel tables "
            f"({', '.join(donors)}; geometric mean)",
        )
    return profile


def _with_package_fits(profile: CostProfile, fitted_key: str) -> CostProfile:
    """The package's end-to-end fits: the engine's (all GPUs, ``engine_load.yaml``), then the GPU's own file
    (its kernels, then its engine section), each replacing what came before."""
    as_note = f" (fitted for {fitted_key})" if fitted_key != profile.engine else ""
    eng = _defaults()["engines"].get(profile.engine) or {}
    shared = _read_yaml("engine_load.yaml")
    if shared and fitted_key in shared.get("engines", {}):
        src = f"fitted (engine, all GPUs){as_note}: {shared.get('fitted_from', 'calibration')}"
        profile = profile.with_values(_release_values(eng, shared["engines"][fitted_key]), src)
    silicon = silicon_fit()
    if profile.engine in silicon.get("engines", {}):  # fitted per release: its own id, never ``fitted_as``
        src = f"fitted (release, all GPUs): {silicon.get('fitted_from', 'public silicon rows')}"
        profile = profile.with_values(_flatten(silicon["engines"][profile.engine]), src)
    data = _overrides.get(profile.hardware) or _gpu_profile_file(profile.hardware)
    if data:
        src = f"fitted: {data.get('fitted_from', 'calibration')}"
        kernel_vals = _flatten(data.get("kernels", {}))
        if kernel_vals:
            profile = profile.with_values(kernel_vals, src)
        engine_vals = _release_values(eng, data.get("engines", {}).get(fitted_key, {}))
        if engine_vals:
            profile = profile.with_values(engine_vals, src)
    return profile


def _with_user_fits(profile: CostProfile, fitted_key: str) -> CostProfile:
    """The profiles given with ``--profile`` for this GPU, in order: their kernels, then their engine section."""
    for path, user in _user_profiles.get(profile.hardware, []):
        src = f"fitted ({path}): {user.get('fitted_from', 'calibration')}"
        engines = user.get("engines") or {}
        for section in (user.get("kernels") or {}, engines.get(profile.engine, engines.get(fitted_key, {}))):
            if section:
                profile = profile.with_values(_flatten(section), src)
    return profile


def _release_values(eng: dict[str, Any], fitted: dict[str, Any]) -> dict[str, Any]:
    """The fitted values of the release an engine profile takes them from (``fitted_as``), less those its own
    release keeps at the prior (``keeps_prior``: what the data show changed between the releases)."""
    keep = set(eng.get("keeps_prior", ()))
    return {k: v for k, v in _flatten(fitted).items() if k not in keep}


def serving_stream_scale() -> tuple[float, tuple[str, ...]]:
    """(ratio, GPUs): how much faster engines stream HBM end to end than the kernel tables' GEMM fits say, as the
    geometric mean of fitted / measured ``hbm_efficiency`` over the GPUs that have both (H100 SXM 0.96 against
    0.85: weights read once per step, where the tables time each GEMM cold). A GPU with tables but no end-to-end
    points streams at its tables' rate times this, so that decode keeps the datasheet's bandwidth ratios between
    GPUs instead of carrying one GPU's fit alone (benchmarks/heldout_silicon.md: TPOT on B200 was over-predicted
    by 16-18 % on TensorRT-LLM and vLLM). (1.0, ()) without such GPUs."""
    from infercast.specs.catalog import hardware_catalog

    ratios, donors = [], []
    for gpu in hardware_catalog():
        measured = (_measured_kernels(gpu) or {}).get("kernels", {}).get("hbm_efficiency")
        fitted = ((_overrides.get(gpu) or _gpu_profile_file(gpu) or {}).get("kernels") or {}).get("hbm_efficiency")
        if measured and fitted:
            ratios.append(math.log(float(fitted) / float(measured)))
            donors.append(gpu)
    return (math.exp(sum(ratios) / len(ratios)), tuple(donors)) if ratios else (1.0, ())


MEASURED_DIR = "kernels"
"""Subfolder of cost/profiles/ with the measured kernel profiles (apart from the end-to-end fits, which
``scripts/fit_profiles.py`` rewrites from scratch)."""


@cache
def _measured_kernels(hardware_id: str) -> dict[str, Any] | None:
    """``profiles/kernels/<id>.yaml``: kernel parameters and collective curves measured on this GPU."""
    data = _read_yaml(f"{MEASURED_DIR}/{hardware_id}.yaml")
    return data if isinstance(data, dict) and data.get("hardware") == hardware_id else None


def collective_table_key(engine: str, available: Any) -> str | None:
    """Which engine's measured collectives an engine profile uses: its own family's (``vllm-0.6`` -> ``vllm``)
    where measured, else NCCL's (what a plain PyTorch/NCCL process runs), else none."""
    family = engine.split("-", 1)[0]
    if family in available:
        return family
    return "nccl" if "nccl" in available else None


def _apply_measured(profile: CostProfile, data: dict[str, Any], engine: str) -> CostProfile:
    """The GPU's measured kernels: the base tables' values, then the engine's own GEMM curves where its tables
    have them (``engine_kernels``: current engines by id, a later release by ``fitted_as``), then the collectives."""
    source = data.get("source", "measured kernel tables")
    per_engine, per_engine_prov = data.get("engine_kernels", {}), data.get("engine_provenance", {})
    own = engine if engine in per_engine else fitted_as(engine)
    layers = [
        (data.get("kernels", {}), data.get("provenance", {})),
        (per_engine.get(own, {}), per_engine_prov.get(own, {})),
    ]
    for kernels, sources in layers:
        values = _flatten(kernels)
        if values:
            profile = profile.with_values(values, f"measured: {source}")
            prov = dict(profile.provenance)
            for key in values:
                if key in sources:
                    prov[key] = f"measured: {source}: {sources[key]}"
            profile = replace(profile, provenance=prov)
    curves: dict[str, dict[int, Curve]] = {}
    prov = dict(profile.provenance)
    for kind, by_engine in (data.get("collectives") or {}).items():
        table_key = collective_table_key(engine, by_engine)
        if table_key is None:
            continue
        entry = by_engine[table_key]
        label = f"measured: {source}: {entry.get('table', kind)} ({table_key})"
        curves[kind] = {
            int(n): Curve.from_points(pts["bytes"], [t * 1e-6 for t in pts["us"]], label)
            for n, pts in entry["sizes"].items()
        }
        prov[f"collective.{kind}"] = label
    if curves:
        profile = replace(profile, collectives=curves, provenance=prov)
    return profile


@cache
def has_fitted_profile(hardware_id: str) -> bool:
    """Whether a GPU has a fitted profile (installed file or in-process override); read once per process."""
    return hardware_id in _overrides or hardware_id in _user_profiles or _gpu_profile_file(hardware_id) is not None


def fitted_as(engine: str) -> str:
    """The engine whose fitted values an engine profile takes (``fitted_as`` in profiles/defaults.yaml: a later
    release of the same server); itself where it names none or has no priors."""
    return str((_defaults()["engines"].get(engine) or {}).get("fitted_as", engine))


def has_measured_kernels(hardware_id: str) -> bool:
    """Whether a GPU has measured kernel parameters (``profiles/kernels/<id>.yaml``)."""
    return _measured_kernels(hardware_id) is not None


def _gpu_profile_file(hardware_id: str) -> dict[str, Any] | None:
    """The fitted ``profiles/<id>.yaml`` of a GPU; a file that names another GPU (defaults.yaml and engine_load.yaml,
    were a user accelerator called "defaults" or "engine_load") is not its profile."""
    data = _read_yaml(f"{hardware_id}.yaml")
    return data if isinstance(data, dict) and data.get("hardware") == hardware_id else None


def _flatten(section: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in section.items():
        if isinstance(value, dict):
            for sub, v in value.items():
                out[f"{key}.{sub}"] = float(v)
        else:
            out[key] = float(value)
    return out
