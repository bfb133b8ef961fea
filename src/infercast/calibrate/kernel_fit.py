"""Fit infercast's kernel parameters to the GEMM and attention tables of aiconfigurator-core, and write them with
the collective curves as ``cost/profiles/kernels/<gpu>.yaml`` (:func:`build_kernel_profile`).

The functional forms are the step model's (:mod:`infercast.cost.step`), with a measured fixed time per kernel:

* GEMM (M x K) @ (K x N):  ``max(2MNK / (peak · eff_max · M/(M + m_half)),  bytes / (HBM · hbm_eff)) + t_gemm``
* decode attention:        ``KV bytes / (HBM · attn_decode_eff) + t_attn_decode + sequences · t_seq``
* prefill attention:       ``causal FLOPs / (peak · attn_prefill_eff) + t_attn_prefill``
* routed MoE experts (one fused-MoE layer on one rank, :func:`moe_layer_time`): the two grouped GEMMs as
  GEMMs of ``M = T·k/E`` rows per expert with their own ``moe_eff_max``, ``moe_m_half``, ``moe_hbm_efficiency``
  (weights of the touched experts, ``E/ep · (1 − (1 − k/E)^T)``) and ``moe_latency_s`` per GEMM kernel, plus
  ``moe_pair_passes`` passes over the activations of every routed token-expert pair, ``T·k·(h + w)`` 16-bit
  elements at the MoE streaming rate (gather, intermediate buffers, activation and weighted sum run over all
  pairs the rank's kernels see, local or not), plus what the step model charges the same layer elsewhere
  (the activation kernel, the three routing kernels), fixed from the dense fits
* weight-only MXFP4 experts on GPUs without FP4 tensor cores: the dense 16-bit GEMM curve with ``eff_max`` and
  ``m_half`` divided by one factor (:func:`w4a16_slowdown`), so only many rows per expert pay the dequantising;
  one factor for the tables' MXFP4 kernel, one for vLLM's Marlin kernel (:data:`MARLIN_EXPERTS`); the tables'
  MXFP4 kernel also in the fused-MoE form (``moe_*.mxfp4``, :func:`_fit_fused_weight_only`)
* vLLM's Triton kernel on block-FP8 experts where the GPU's base fp8 fit is another kernel: the fused-MoE form
  again, on that kernel's rows of whichever release timed it (:data:`TRITON_FP8_EXPERTS`)
* gated-DeltaNet prefill (:func:`fit_gdn`): ``max(chunks · t_chunk, FLOPs / (peak · eff)) + t0``, a sequence's
  64-token chunks in series

Each is fitted by least squares on log time over every row of the newest table of one engine (vLLM's where
present: its GEMMs are cuBLAS through torch, as SGLang's), and reports points and RMS log residual.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.optimize import least_squares

from infercast.cost.operators import ROUTING_KERNELS
from infercast.cost.profile import MOE_PAIR_ELEMENT_BYTES, MOE_PARAMS, MOE_WIDTH_HALF, SAME_DIE
from infercast.errors import InfercastError
from infercast.records.kernel_tables import (
    GPU_DIRS,
    Source,
    import_collectives,
    latest,
    read_table,
    relative,
    version_key,
)
from infercast.specs.catalog import get_hardware
from infercast.specs.precision import FORMATS

if TYPE_CHECKING:
    from infercast.specs.hardware import HardwareSpec

ENGINES = ("vllm", "sglang", "trtllm")
"""Engine folders searched for kernel tables, in order of preference."""

GEMM_SOURCES = {
    "bf16": ("bfloat16", ("torch.nn.functional.linear", "torch")),
    "fp8": ("fp8", ("Cutlass",)),
    "fp4": ("nvfp4", ()),
}
"""infercast compute key -> (gemm_dtype in the table, kernel_source prefixes accepted; none: the table's most
measured kernel). fp4: NVFP4 W4A4 GEMMs (vLLM's FlashInfer CuTe-DSL kernel, SGLang's, TensorRT-LLM's), on the GPUs
whose tables have them (Blackwell)."""
GEMM_WIDTH = {"fp8": 1.0, "fp4": FORMATS["nvfp4"].bytes_per_element}
"""Bytes per weight/activation element of a compute key's GEMM inputs (16-bit otherwise): NVFP4 adds one 8-bit
scale per 16 elements (the format catalog's, specs/precision.py)."""

MIN_DIM = 1024
"""GEMMs fitted: N and K at least this (every linear layer of the catalog's LLMs at TP <= 8)."""
MIN_HEADS = 4
"""Attention rows fitted: at least this many query heads per GPU (the catalog's models at TP <= 8)."""
M_FLOOR = 16.0  # CostProfile.gemm_m_floor: tensor-core tiles are at least 16 rows


def _newest(source: Source, gpu_id: str, op: str, filename: str) -> tuple[str, Any] | None:
    for engine in ENGINES:
        path = latest(source.gpu(gpu_id) / op / engine, filename)
        if path is not None:
            return relative(source, path), read_table(path)
    return None


BOUND_TOLERANCE = 1e-4
"""A fitted parameter within this log distance (0.01 %) of a bound is reported as on it."""


def _fit(
    residual: Any, start: list[float], lower: list[float], upper: list[float], names: tuple[str, ...]
) -> tuple[np.ndarray, float, list[str]]:
    """Least squares on log residuals; returns the parameters, the RMS log residual and the names of those that
    ended on a bound (the data wanted them further out: not a measured value, said in the profile's provenance)."""
    res = least_squares(residual, np.log(start), bounds=(np.log(lower), np.log(upper)), method="trf")
    r = residual(res.x)
    edge = np.isclose(res.x, np.log(lower), rtol=0.0, atol=BOUND_TOLERANCE) | np.isclose(
        res.x, np.log(upper), rtol=0.0, atol=BOUND_TOLERANCE
    )
    return np.exp(res.x), float(np.sqrt(np.mean(r**2))), [n for n, e in zip(names, edge, strict=True) if e]


QUANT_BYTES_BOUNDS = (1e-3, 16.0)
"""Bytes per input activation element of an 8-bit GEMM's activation quantisation pass, at the datasheet HBM rate
(``gemm_act_quant_bytes``): at least read 16-bit + write 8-bit (3 B) for an unfused dynamic quantisation, more
with a separate amax pass; 16 bounds it (five such passes). The tables time the quantisation with the GEMM
(vLLM ``scaled_fp8_quant`` before CUTLASS ``cutlass_scaled_mm``), a memory-bound term in M x K that the
hyperbolic curve in M alone cannot hold: without it, large-M efficiency came out 0.40-0.57 of the fp8 peak
(0.65-0.77 with it; RMS log residual 0.15 -> 0.06-0.08 on TensorRT-LLM's tables)."""


def fit_gemm(frame: Any, peak: float, bandwidth: float, dtype: str, sources: tuple[str, ...], width: float) -> dict:
    """(eff_max, m_half, hbm_eff, t0[, quant bytes]) of one GEMM dtype; ``width``: bytes per weight/activation
    element. 8-bit GEMMs (``width`` < 2) add a serial activation-quantisation pass, ``q·M·K / bandwidth``."""
    rows = frame[frame["gemm_dtype"] == dtype]
    rows = rows[(rows["n"] >= MIN_DIM) & (rows["k"] >= MIN_DIM)]
    if rows.empty:
        return {}
    preferred = rows[rows["kernel_source"].str.startswith(sources)]
    # the engine's default kernel for this dtype: the preferred one, else the table's most measured one
    kernel = (preferred if not preferred.empty else rows)["kernel_source"].value_counts().index[0]
    rows = rows[rows["kernel_source"] == kernel]
    m, n, k = (rows[c].to_numpy(float) for c in ("m", "n", "k"))
    t = rows["latency"].to_numpy(float) * 1e-3
    if "_bandwidth" in rows.columns:  # rows of two GPUs pooled (:func:`pooled`): each streams at its own HBM's rate
        bandwidth = rows["_bandwidth"].to_numpy(float)
    flops = 2 * m * n * k
    nbytes = (m * k + k * n) * width + m * n * 2.0  # outputs in 16 bits
    rows_eff = np.maximum(m, M_FLOOR)
    quantised = width < 2.0
    act = m * k / bandwidth  # seconds per byte of quantisation traffic per input element

    def model(x: np.ndarray) -> np.ndarray:
        eff, half, hbm, t0 = np.exp(x[:4])
        quant = np.exp(x[4]) * act if quantised else 0.0
        return np.maximum(flops / (peak * eff * rows_eff / (rows_eff + half)), nbytes / (bandwidth * hbm)) + quant + t0

    names: tuple[str, ...] = ("gemm_eff_max", "gemm_m_half", "hbm_efficiency", "gemm_latency_s")
    start, lower, upper = [0.8, 64.0, 0.85, 3e-6], [0.05, 0.5, 0.3, 1e-8], [1.0, 8192.0, 1.0, 5e-5]
    if quantised:
        names += ("gemm_act_quant_bytes",)
        start, lower, upper = [*start, 3.0], [*lower, QUANT_BYTES_BOUNDS[0]], [*upper, QUANT_BYTES_BOUNDS[1]]
    params, rms, edge = _fit(lambda x: np.log(model(x) / t), start, lower, upper, names)
    return {
        "eff_max": params[0],
        "m_half": params[1],
        "hbm": params[2],
        "t0": params[3],
        "quant_bytes": params[4] if quantised and params[4] > QUANT_BYTES_BOUNDS[0] * 1.01 else 0.0,
        "points": len(rows),
        "rms_log_residual": rms,
        "kernel": str(kernel),
        "at_bound": edge,
    }


def _attention_rows(frame: Any) -> Any:
    """bf16 KV, no sliding window, the most common kernel."""
    rows = frame[frame["kv_cache_dtype"].isin(("bfloat16", "float16"))]
    if "window_size" in rows.columns:
        rows = rows[rows["window_size"] == 0]
    rows = rows[(rows["num_heads"] >= MIN_HEADS) & rows["head_dim"].isin((64, 128))]
    if rows.empty:
        return rows
    top = rows["kernel_source"].value_counts().index[0]
    return rows[rows["kernel_source"] == top]


def fit_decode_attention(frame: Any, bandwidth: float) -> dict:
    """(efficiency, t0) of decode attention: KV bytes read (batch x context x KV heads x head_dim x 2 x 2)."""
    rows = _attention_rows(frame)
    if rows.empty:
        return {}
    b, ctx = rows["batch_size"].to_numpy(float), rows["step"].to_numpy(float) + rows["isl"].to_numpy(float)
    kv, hd, nq = (rows[c].to_numpy(float) for c in ("num_key_value_heads", "head_dim", "num_heads"))
    nbytes = b * ctx * kv * hd * 2 * 2 + b * nq * hd * 2 * 2  # K and V in bf16, plus q in and o out
    t = rows["latency"].to_numpy(float) * 1e-3

    def residual(x: np.ndarray) -> np.ndarray:
        eff, t0, ts = np.exp(x)
        return np.log((nbytes / (bandwidth * eff) + t0 + ts * b) / t)

    params, rms, edge = _fit(
        residual,
        [0.8, 8e-6, 1e-7],
        [0.1, 1e-8, 1e-10],
        [1.0, 1e-4, 1e-5],
        ("attn_decode_efficiency", "attn_decode_latency_s", "attn_decode_seq_s"),
    )
    return {
        "eff": params[0],
        "t0": params[1],
        "t_seq": params[2],
        "points": len(rows),
        "rms_log_residual": rms,
        "at_bound": edge,
        "kernel": str(rows["kernel_source"].iloc[0]),
    }


def fit_prefill_attention(frame: Any, peak: float) -> dict:
    """(efficiency, t0) of prefill attention: causal FLOPs 4 · heads · head_dim · batch · s(s+1)/2."""
    rows = _attention_rows(frame)
    if rows.empty:
        return {}
    b, s = rows["batch_size"].to_numpy(float), rows["isl"].to_numpy(float)
    nq, hd = rows["num_heads"].to_numpy(float), rows["head_dim"].to_numpy(float)
    flops = 4 * nq * hd * b * s * (s + 1) / 2
    t = rows["latency"].to_numpy(float) * 1e-3

    def residual(x: np.ndarray) -> np.ndarray:
        eff, t0 = np.exp(x)
        return np.log((flops / (peak * eff) + t0) / t)

    params, rms, edge = _fit(
        residual, [0.5, 1e-5], [0.02, 1e-8], [1.0, 1e-3], ("attn_prefill_efficiency", "attn_prefill_latency_s")
    )
    return {
        "eff": params[0],
        "t0": params[1],
        "points": len(rows),
        "rms_log_residual": rms,
        "at_bound": edge,
        "kernel": str(rows["kernel_source"].iloc[0]),
    }


MOE_SOURCES = {
    "bf16": ("bfloat16", ()),
    "fp8": ("fp8_block", ("vllm_fp8moe_triton",)),
    "fp4": ("nvfp4", ()),
    "int4": ("int4_wo", ()),
}
"""infercast compute key -> (moe_dtype in the table, kernel_source prefixes preferred). bf16: the table's most
measured kernel (vLLM's default unquantized fused MoE: Triton on Hopper/Ampere/Ada, FlashInfer TRT-LLM on
Blackwell). fp8: 128x128 block-scaled FP8 (DeepSeek-V3/R1 and Qwen3 FP8 checkpoints), vLLM's Triton fused MoE
where measured (its default on Hopper/Ada; the FlashInfer CUTLASS rows are opt-in backends), else the most
measured kernel (FlashInfer TRT-LLM on Blackwell). fp4: NVFP4 experts (Blackwell). int4: weight-only int4 experts
(:data:`MOE_WEIGHT_ONLY`). Per-tensor ModelOpt FP8 ("fp8" rows) is not imported."""
TRITON_FP8_EXPERTS = ("fp8_triton", "fp8_block", ("vllm_fp8moe_triton", "vllm_fused_moe"))
"""(key, moe_dtype, kernel sources) of vLLM's Triton fused-MoE kernel on block-scaled FP8 experts, fitted where the
base fp8 fit is another kernel (Blackwell, whose vLLM default is FlashInfer's TRT-LLM kernel). vLLM falls back to it
when a launch turns FlashInfer and DeepGEMM off (``VLLM_USE_FLASHINFER_MOE_FP8=0``, ``VLLM_MOE_USE_DEEP_GEMM=0``:
``select_fp8_moe_backend``, vllm/model_executor/layers/fused_moe/oracle/fp8.py); the wheel times it in an older
release's table (``vllm_fused_moe``: vLLM 0.22 on B200 in aiconfigurator-core 0.12)."""
MOE_WEIGHT_ONLY = {"int4": (FORMATS["int4-g32"].bytes_per_element, "bf16")}
"""Weight-only expert formats (16-bit activations): bytes per expert weight (int4 with a 16-bit scale per group of
32, the format catalog's) and the compute key whose peak they run at: Marlin W4A16 experts (Kimi-K2.5's int4
checkpoint). gpt-oss's MXFP4 experts are fitted beside the lowered dense curve (:data:`W4A16_EXPERTS`), on EP 1 rows
only; vLLM's Marlin kernel, where a launch picks it, keeps the lowered curve (``w4a16_marlin``)."""
MOE_DISTRIBUTION = "power_law_1.01"
"""Rows fitted: tokens routed to the experts by a power law of exponent 1.01, aiconfigurator's own default for MoE
estimates (aiconfigurator-core 0.12.0 sdk/config.py ``workload_distribution = "power_law"``, sdk/models/deepseek.py
``_power_law_alpha = 1.01``): served prompts do not route evenly. The step model keeps its balanced token count,
so the fitted efficiencies carry the imbalance (the balanced rows under-predicted MoE prefill:
docs/accuracy-notes.md)."""
MOE_START = [0.6, 32.0, 0.7, 5e-6, 1.0]
MOE_LOWER = [0.02, 0.5, 0.05, 1e-8, 1e-4]
MOE_UPPER = [1.0, 8192.0, 1.0, 2e-4, 100.0]
WIDTH_HALF = (128.0, 1.0, 8192.0)
"""Start and bounds of ``moe_width_half`` (expert columns per rank)."""
WIDTH_GAIN = 0.01
"""A kernel's fit takes the width term only where it lowers the RMS log residual by this share: elsewhere its
table shows no narrow-shard slowdown worth a sixth parameter."""


@dataclass(frozen=True)
class MoEShapes:
    """Per-row quantities of a fused-MoE table (arrays): everything :func:`moe_layer_time` needs."""

    tokens: np.ndarray
    flops: np.ndarray  # both grouped GEMMs, per layer per rank
    gate_up: tuple[np.ndarray, np.ndarray]  # (FLOPs, bytes) of the gate/up GEMM
    down: tuple[np.ndarray, np.ndarray]
    rows: np.ndarray  # GEMM rows per expert, floored at M_FLOOR
    pairs: np.ndarray  # bytes of the routed pairs' activations, T·k·(h + w)·2
    known: np.ndarray  # seconds the step model charges the layer outside the two expert GEMM rows
    width: np.ndarray  # expert columns per rank (intermediate size / MoE TP)


def moe_shapes(
    frame: Any, width: float, vector_peak: float, bandwidth: float, hbm: float, t_gemm: float, balanced: bool = True
) -> MoEShapes:
    """FLOPs and bytes of each table row as :func:`infercast.cost.operators.build_op_table` counts them for one
    MoE layer on one rank (gated experts, 16-bit activations; ``width`` bytes per expert weight), and the time
    the step model charges the same layer's activation row (``hbm``: dense streaming efficiency) and routing
    kernels (``t_gemm`` each)."""
    t, h, inter, k, e, tp, ep = (
        frame[c].to_numpy(float)
        for c in ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size")
    )
    w = inter / tp
    routed = t * k / ep  # rows of this rank's experts
    # experts of this rank at least one token reaches: a "balanced" table spreads the T·k pairs evenly, touching
    # min(E, T·k) experts (the step model, for real routing, takes the expectation under uniform random routing,
    # E·(1 − (1 − k/E)^T); the two agree at T = 1 and from T ≈ E/k·4 on)
    touched = np.minimum(e, t * k) / ep if balanced else (e / ep) * -np.expm1(t * np.log1p(-k / e))
    act = 2.0
    gate_up = (2 * routed * h * 2 * w, touched * h * 2 * w * width + routed * (h + 2 * w) * act)
    down = (2 * routed * w * h, touched * w * h * width + routed * (w + h) * act)
    act_bytes = t * (k / ep * (3 * w + h) + h) * act
    act_flops = t * k / ep * 4 * w
    # the router row's routing kernels, each at the dense GEMM's fixed time, are inside the measured time too
    known = np.maximum(act_flops / vector_peak, act_bytes / (bandwidth * hbm)) + ROUTING_KERNELS * t_gemm
    pairs = t * k * (h + w) * MOE_PAIR_ELEMENT_BYTES
    return MoEShapes(t, gate_up[0] + down[0], gate_up, down, np.maximum(t * k / e, M_FLOOR), pairs, known, w)


def moe_layer_time(s: MoEShapes, peak: float, bandwidth: float, params: Any) -> np.ndarray:
    """Seconds of one fused-MoE layer on one rank: the step model's expert rows with the MoE parameters
    ``(eff_max, m_half, hbm_eff, t_kernel, pair_passes[, width_half])``, plus the known rest (:class:`MoEShapes`)."""
    eff, half, hbm, t0, passes = params[:5]
    slow = (s.rows + half) / (s.rows * peak * eff)
    if len(params) > 5:
        slow = slow * (s.width + params[5]) / s.width
    total = s.known + 2 * t0 + passes * s.pairs / (bandwidth * hbm)
    for flops, nbytes in (s.gate_up, s.down):
        total = total + np.maximum(flops * slow, nbytes / (bandwidth * hbm))
    return total


def fit_moe(shapes: MoEShapes, latency_s: np.ndarray, peak: float, bandwidth: float) -> dict:
    """(eff_max, m_half, hbm_eff, t_kernel, pair_passes) of one MoE kernel by least squares on log time, and
    ``width_half`` (:data:`WIDTH_HALF`) where the rows show narrow shards slowing it down (:data:`WIDTH_GAIN`)."""

    def residual(x: np.ndarray) -> np.ndarray:
        return np.log(moe_layer_time(shapes, peak, bandwidth, np.exp(x)) / latency_s)

    start, lower, upper = ([*b, w] for b, w in zip((MOE_START, MOE_LOWER, MOE_UPPER), WIDTH_HALF, strict=True))
    params, rms, edge = _fit(residual, MOE_START, MOE_LOWER, MOE_UPPER, MOE_PARAMS)
    wide = _fit(residual, start, lower, upper, (*MOE_PARAMS, MOE_WIDTH_HALF))
    if wide[1] < (1.0 - WIDTH_GAIN) * rms:
        params, rms, edge = wide
    out = {
        "eff_max": params[0],
        "m_half": params[1],
        "hbm": params[2],
        "t0": params[3],
        "passes": params[4],
        "points": len(latency_s),
        "rms_log_residual": rms,
        "at_bound": edge,
    }
    if len(params) > 5:
        out["width_half"] = params[5]
    return out


def _store_moe(kernels: dict, prov: dict, key: str, r: dict, note: str) -> None:
    """A fused-MoE fit's six parameters under ``key`` in ``kernels``, with ``note``: the width term 0 where the fit
    has none, so that an engine's own fit of a key never keeps the base fit's width term."""
    values = (r["eff_max"], r["m_half"], r["hbm"], r["t0"], r["passes"], r.get("width_half", 0.0))
    for name, value in zip((*MOE_PARAMS, MOE_WIDTH_HALF), values, strict=True):
        kernels.setdefault(name, {})[key] = _g(value)
        prov[f"{name}.{key}"] = note


def moe_rows(
    source: Source,
    gpu_id: str,
    dtype: str,
    prefixes: tuple[str, ...],
    engines: tuple[str, ...] = ENGINES,
    require: bool = False,
) -> tuple[str, str, Any] | None:
    """(table, kernel, rows): the rows of ``dtype`` in the newest fused-MoE table of the first of ``engines`` (vLLM,
    SGLang, TensorRT-LLM) that has them, routed as :data:`MOE_DISTRIBUTION` (else balanced, where a table has only
    those), of the preferred kernel, else the most measured one (``require``: only a table with the preferred
    kernel, of any release)."""
    for engine in engines:
        folder = source.gpu(gpu_id) / "moe" / engine
        if not folder.is_dir():
            continue
        versions = sorted(
            (v for v in folder.iterdir() if (v / "moe_perf.parquet").is_file()),
            key=lambda v: version_key(v.name),
            reverse=True,
        )
        for version in versions:
            path = version / "moe_perf.parquet"
            frame = read_table(path)
            rows = frame[(frame["moe_dtype"] == dtype) & (frame["latency"] > 0)]
            spread = MOE_DISTRIBUTION if (rows["distribution"] == MOE_DISTRIBUTION).any() else "balanced"
            rows = rows[rows["distribution"] == spread]
            if rows.empty:
                continue
            preferred = rows[rows["kernel_source"].str.startswith(prefixes)] if prefixes else rows.iloc[:0]
            if require and preferred.empty:
                continue
            kernel = (preferred if not preferred.empty else rows)["kernel_source"].value_counts().index[0]
            return relative(source, path), str(kernel), rows[rows["kernel_source"] == kernel]
    return None


def die_partner(gpu_id: str) -> str | None:
    """The GPU sharing ``gpu_id``'s die at the same tensor peak (:data:`infercast.cost.profile.SAME_DIE`)."""
    pairs = [(a, b) for a, b in SAME_DIE.items()] + [(b, a) for a, b in SAME_DIE.items()]
    return next((b for a, b in pairs if a == gpu_id), None)


def pooled(frame: Any, bandwidth: float, other: Any, other_bandwidth: float) -> Any:
    """Two GPUs' tables as one, each row tagged with its GPU's HBM bandwidth (``_bandwidth``): a same-die pair's
    compute-bound curve is fitted on both at one absolute tensor rate (the peak given to the fit)."""
    import pandas as pd

    return pd.concat([frame.assign(_bandwidth=bandwidth), other.assign(_bandwidth=other_bandwidth)], ignore_index=True)


def _g(x: float) -> float:
    return float(f"{x:.4g}")


def _fit_gemm_table(
    hw: HardwareSpec,
    table: str,
    frame: Any,
    kernels: dict,
    prov: dict,
    fits: dict,
    suffix: str = "",
    curves_only: bool = False,
    partner: tuple[str, str, Any] | None = None,
) -> None:
    """GEMM curves (``gemm_eff_max``, ``gemm_m_half`` per compute key) of one engine's table into ``kernels``;
    unless ``curves_only``, also the streaming efficiency and fixed GEMM time from its 16-bit GEMMs. ``partner``
    (GPU id, table, rows of the same engine's table on the GPU sharing this one's die): the curve is fitted on
    both tables at this GPU's peak, the rest on this GPU's own rows."""
    bandwidth = hw.memory.bandwidth_bytes_s
    for key, (dtype, prefixes) in GEMM_SOURCES.items():
        if key not in hw.peak_flops:
            continue
        width = GEMM_WIDTH.get(key, 2.0)
        r = fit_gemm(frame, hw.peak(key), bandwidth, dtype, prefixes, width)
        if not r:
            continue
        note = (
            f"{table} {dtype} ({r['kernel']}), {r['points']} points, "
            f"RMS log residual {r['rms_log_residual']:.3f}{_at_bound(r)}"
        )
        if partner is not None:
            other_bw = get_hardware(partner[0]).memory.bandwidth_bytes_s
            both = fit_gemm(
                pooled(frame, bandwidth, partner[2], other_bw), hw.peak(key), bandwidth, dtype, prefixes, width
            )
            if both:
                r = r | {"eff_max": both["eff_max"], "m_half": both["m_half"]}
                note += (
                    f"; gemm_eff_max and gemm_m_half pooled with {partner[0]}'s {partner[1]} (same die, one "
                    f"tensor-core curve), {both['points']} points, RMS log residual {both['rms_log_residual']:.3f}"
                )
        kernels.setdefault("gemm_eff_max", {})[key] = _g(r["eff_max"])
        kernels.setdefault("gemm_m_half", {})[key] = _g(r["m_half"])
        prov[f"gemm_eff_max.{key}"] = prov[f"gemm_m_half.{key}"] = note
        if r["quant_bytes"]:
            kernels.setdefault("gemm_act_quant_bytes", {})[key] = _g(r["quant_bytes"])
            prov[f"gemm_act_quant_bytes.{key}"] = note + "; serial activation quantisation in M x K fitted with it"
        fits[f"gemm.{key}{suffix}"] = {
            "table": table,
            "dtype": dtype,
            "kernel": r["kernel"],
            "points": r["points"],
            "rms_log_residual": round(r["rms_log_residual"], 4),
            "hbm_efficiency": _g(r["hbm"]),
            "latency_s": _g(r["t0"]),
            **({"act_quant_bytes": _g(r["quant_bytes"])} if r["quant_bytes"] else {}),
            **_bound_entry(r),
        }
        if key == "bf16" and not curves_only:  # the streaming efficiency and fixed GEMM time: 16-bit GEMMs
            kernels["hbm_efficiency"] = _g(r["hbm"])
            kernels["gemm_latency_s"] = _g(r["t0"])
            prov["hbm_efficiency"] = prov["gemm_latency_s"] = note


def _partner_table(
    source: Source, gpu_id: str, op: str, filename: str, engine: str | None = None
) -> tuple[str, str, Any] | None:
    """(GPU, table, rows) of the newest ``op`` table (of ``engine``, else of the first engine that has one) on the
    GPU sharing ``gpu_id``'s die; None without such a GPU or table."""
    other = die_partner(gpu_id)
    if other is None:
        return None
    if engine is None:
        found = _newest(source, other, op, filename)
        return (other, *found) if found else None
    path = latest(source.gpu(other) / op / engine, filename)
    return (other, relative(source, path), read_table(path)) if path is not None else None


def fit_engine_gemms(
    source: Source, gpu_id: str, base_table: str, fits: dict, base: dict | None = None
) -> tuple[dict, dict]:
    """Per engine whose own GEMM table is not the base one: its GEMM curves (``gemm_eff_max``, ``gemm_m_half``),
    and their provenance. Each engine runs its own GEMM kernels (TensorRT-LLM's FP8 path is not vLLM's CUTLASS
    one); streaming efficiency and fixed GEMM time stay the base table's, shared by every engine on the GPU."""
    hw = get_hardware(gpu_id)
    curves: dict[str, dict] = {}
    provenance: dict[str, dict] = {}
    for engine in ENGINES:
        path = latest(source.gpu(gpu_id) / "gemm" / engine, "gemm_perf.parquet")
        if path is None or relative(source, path) == base_table:
            continue
        kernels: dict[str, Any] = {}
        prov: dict[str, str] = {}
        partner = _partner_table(source, gpu_id, "gemm", "gemm_perf.parquet", engine)
        table, frame = relative(source, path), read_table(path)
        _fit_gemm_table(hw, table, frame, kernels, prov, fits, f".{engine}", True, partner)
        _fit_w4a16_experts(source, gpu_id, kernels, prov, fits, (engine,), base)
        _fit_engine_moe(source, gpu_id, engine, kernels, prov, fits, base or {})
        _fit_gdn_table(source, gpu_id, kernels, prov, fits, (engine,))
        if kernels:
            curves[engine], provenance[engine] = kernels, prov
    return curves, provenance


def fit_kernels(source: Source, gpu_id: str) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """(kernel parameter values, provenance per parameter, fit statistics) for one GPU."""
    hw = get_hardware(gpu_id)
    bandwidth = hw.memory.bandwidth_bytes_s
    kernels: dict[str, Any] = {}
    prov: dict[str, str] = {}
    fits: dict[str, Any] = {}
    gemm = _newest(source, gpu_id, "gemm", "gemm_perf.parquet")
    if gemm is not None:
        partner = _partner_table(source, gpu_id, "gemm", "gemm_perf.parquet", gemm[0].split("/")[1])
        _fit_gemm_table(hw, gemm[0], gemm[1], kernels, prov, fits, partner=partner)
    _fit_moe_kernels(source, gpu_id, kernels, prov, fits)
    _fit_w4a16_experts(source, gpu_id, kernels, prov, fits)
    _fit_w4a16_experts(source, gpu_id, kernels, prov, fits, experts=MARLIN_EXPERTS)
    _fit_gdn_table(source, gpu_id, kernels, prov, fits)
    attn = _newest(source, gpu_id, "attention", "generation_attention_perf.parquet")
    if attn is not None:
        table, frame = attn
        r = fit_decode_attention(frame, bandwidth)
        if r:
            note = (
                f"{table} ({r['kernel']}), {r['points']} points, RMS log residual {r['rms_log_residual']:.3f}"
                f"{_at_bound(r)}"
            )
            kernels["attn_decode_efficiency"] = _g(r["eff"])
            kernels["attn_decode_latency_s"] = _g(r["t0"])
            kernels["attn_decode_seq_s"] = _g(r["t_seq"])
            prov["attn_decode_efficiency"] = prov["attn_decode_latency_s"] = prov["attn_decode_seq_s"] = note
            fits["attention.decode"] = {
                "table": table,
                "kernel": r["kernel"],
                "points": r["points"],
                "rms_log_residual": round(r["rms_log_residual"], 4),
                **_bound_entry(r),
            }
    attn = _newest(source, gpu_id, "attention", "context_attention_perf.parquet")
    if attn is not None:
        table, frame = attn
        key = "bf16" if "bf16" in hw.peak_flops else "fp16"
        partner = _partner_table(source, gpu_id, "attention", "context_attention_perf.parquet", table.split("/")[1])
        if partner is not None:  # same die: one tensor-core rate, fitted on both GPUs' rows at this GPU's peak
            frame = pooled(frame, bandwidth, partner[2], get_hardware(partner[0]).memory.bandwidth_bytes_s)
            table = f"{table} pooled with {partner[0]}'s {partner[1]} (same die)"
        r = fit_prefill_attention(frame, hw.peak(key))
        if r:
            note = (
                f"{table} ({r['kernel']}), {r['points']} points, RMS log residual {r['rms_log_residual']:.3f}"
                f"{_at_bound(r)}"
            )
            kernels["attn_prefill_efficiency"] = _g(r["eff"])
            kernels["attn_prefill_latency_s"] = _g(r["t0"])
            prov["attn_prefill_efficiency"] = prov["attn_prefill_latency_s"] = note
            fits["attention.prefill"] = {
                "table": table,
                "kernel": r["kernel"],
                "points": r["points"],
                "rms_log_residual": round(r["rms_log_residual"], 4),
                **_bound_entry(r),
            }
    return kernels, prov, fits


def _at_bound(r: dict) -> str:
    """Provenance suffix naming the parameters a fit left on a bound (empty when none)."""
    return f"; at a fit bound (not measured): {', '.join(r['at_bound'])}" if r.get("at_bound") else ""


def _bound_entry(r: dict) -> dict:
    return {"at_bound": list(r["at_bound"])} if r.get("at_bound") else {}


def _fit_moe_kernels(source: Source, gpu_id: str, kernels: dict, prov: dict, fits: dict) -> None:
    """MoE parameters per compute key from the fused-MoE tables; the fixed terms use the dense fits just made
    (``hbm_efficiency``, ``gemm_latency_s``; the architecture priors' where the GPU has no GEMM table)."""
    from infercast.cost.profile import load_profile

    hw = get_hardware(gpu_id)
    bandwidth = hw.memory.bandwidth_bytes_s
    prior = load_profile(gpu_id, hw.architecture, "vllm", fitted=False, measured=False)
    hbm = kernels.get("hbm_efficiency", prior.hbm_efficiency)
    t_gemm = kernels.get("gemm_latency_s", prior.gemm_latency_s)
    vector_peak = hw.peak_flops.get("fp32", hw.peak_flops.get("bf16", 1e15) / 16.0)
    sources = [(key, dtype, prefixes, False) for key, (dtype, prefixes) in MOE_SOURCES.items()]
    for key, dtype, prefixes, required in [*sources, (*TRITON_FP8_EXPERTS, True)]:
        rate = "fp8" if key == TRITON_FP8_EXPERTS[0] else key
        width, peak_key = MOE_WEIGHT_ONLY.get(rate, (GEMM_WIDTH.get(rate, 2.0), rate))
        if peak_key not in hw.peak_flops:
            continue
        if required and str(fits.get("moe.fp8", {}).get("kernel", "")).startswith(prefixes):
            continue  # the base fp8 fit is this kernel already (Hopper)
        found = moe_rows(source, gpu_id, dtype, prefixes, require=required)
        if found is None and not required:
            prov[f"moe.{key}"] = f"no balanced {dtype} fused-MoE table: routed experts use the dense GEMM parameters"
        if found is None:
            continue
        shapes = moe_shapes(found[2], width, vector_peak, bandwidth, hbm, t_gemm)
        fits[f"moe.{key}"] = _store_moe_fit(hw, found, dtype, key, shapes, peak_key, kernels, prov)


def _store_moe_fit(
    hw: HardwareSpec,
    found: tuple[str, str, Any],
    dtype: str,
    key: str,
    shapes: MoEShapes,
    peak_key: str,
    kernels: dict,
    prov: dict,
) -> dict:
    """Fit :func:`fit_moe` to one kernel's rows (``found``: table, kernel, rows), store its parameters under ``key``
    in ``kernels`` with their provenance (:func:`_store_moe`), and return the fit's statistics for the profile's
    ``fits``."""
    table, kernel, rows = found
    r = fit_moe(shapes, rows["latency"].to_numpy(float) * 1e-3, hw.peak(peak_key), hw.memory.bandwidth_bytes_s)
    note = (
        f"{table} {dtype} ({kernel}, {rows['distribution'].iloc[0]}), {r['points']} points, "
        f"RMS log residual {r['rms_log_residual']:.3f}{_at_bound(r)}"
    )
    _store_moe(kernels, prov, key, r, note)
    return {
        "table": table,
        "dtype": dtype,
        "kernel": kernel,
        "distribution": str(rows["distribution"].iloc[0]),
        "points": r["points"],
        "rms_log_residual": round(r["rms_log_residual"], 4),
        "tp_sizes": sorted(int(x) for x in rows["moe_tp_size"].unique()),
        "ep_sizes": sorted(int(x) for x in rows["moe_ep_size"].unique()),
        **_bound_entry(r),
    }


ENGINE_MOE_KERNELS = {"trtllm": {"cutlass": ("moe_torch_flow_cutlass",), "deepgemm": ("deepgemm",)}}
"""An engine's own fused-MoE kernels where they are not the base fit's: per backend (the suffix of the keys they are
stored under, ``EngineSpec.moe_backend``'s word), the kernel sources in the engine's table. TensorRT-LLM's
``moe_config.backend`` defaults to CUTLASS (``MoeConfig``, tensorrt_llm/llmapi/llm_args.py); DEEPGEMM is a launch's
choice. The base fits are vLLM's Triton (Hopper) and FlashInfer TRT-LLM (Blackwell) kernels; TensorRT-LLM's TRTLLM
backend runs those trtllm-gen kernels on Blackwell."""


def _fit_engine_moe(
    source: Source, gpu_id: str, engine: str, kernels: dict, prov: dict, fits: dict, base: dict
) -> None:
    """``moe_*.<key>_<backend>``: the fused-MoE form fitted to each of ``engine``'s own kernels
    (:data:`ENGINE_MOE_KERNELS`), per compute key its table holds; the fixed terms are the base fits'."""
    if "hbm_efficiency" not in base or "gemm_latency_s" not in base:
        return
    hw = get_hardware(gpu_id)
    bandwidth = hw.memory.bandwidth_bytes_s
    vector_peak = hw.peak_flops.get("fp32", hw.peak_flops.get("bf16", 1e15) / 16.0)
    for backend, prefixes in ENGINE_MOE_KERNELS.get(engine, {}).items():
        for key, (dtype, _) in MOE_SOURCES.items():
            width, peak_key = MOE_WEIGHT_ONLY.get(key, (GEMM_WIDTH.get(key, 2.0), key))
            found = moe_rows(source, gpu_id, dtype, prefixes, engines=(engine,), require=True)
            if peak_key not in hw.peak_flops or found is None:
                continue
            shapes = moe_shapes(found[2], width, vector_peak, bandwidth, base["hbm_efficiency"], base["gemm_latency_s"])
            named = f"{key}_{backend}"
            fits[f"moe.{named}.{engine}"] = _store_moe_fit(hw, found, dtype, named, shapes, peak_key, kernels, prov)


@dataclass(frozen=True)
class WeightOnlyExperts:
    """One weight-only fused-MoE kernel fitted as a lowered dense 16-bit curve: the compute key its curve is stored
    under, the table rows it is fitted on (``moe_dtype``, kernel-source prefixes preferred), and the format whose
    bytes per weight those rows hold."""

    key: str
    dtype: str
    prefixes: tuple[str, ...]
    width: str
    what: str
    fused: str = ""
    """Key of the whole fused-MoE form fitted on the same rows (decode included), where one is."""


W4A16_EXPERTS = WeightOnlyExperts("w4a16", "w4a16_mxfp4", (), "mxfp4", "weight-only MXFP4 experts", "mxfp4")
"""The fused-MoE rows of MXFP4 experts with 16-bit activations (gpt-oss's checkpoint), the table's most measured
kernel (vLLM's OpenAI Triton kernel on Hopper; per engine, its own: SGLang's Triton kernel, TensorRT-LLM's
``moe_torch_flow``, which aiconfigurator's collector runs on the TRITON backend that TensorRT-LLM's
``resolve_moe_backend`` picks for gpt-oss on Hopper: collector/trtllm/collect_moe.py, citing model_config.py at
1.3.0rc20). Fitted only on GPUs without FP4 tensor cores, where every engine runs such experts weight-only
(dequantising to 16-bit in the kernel); Blackwell's engines run them as MXFP4 x MXFP8 (TensorRT-LLM, FlashInfer),
not this table's kernel. Both forms are fitted: the lowered dense curve (``gemm_*.w4a16``) and the whole fused-MoE
form (``moe_*.mxfp4``), which the step model takes where present."""
MARLIN_EXPERTS = WeightOnlyExperts(
    "w4a16_marlin",
    "int4_wo",
    ("vllm_compressedtensorswna16marlinmoe_marlin",),
    "int4-g32",
    "MXFP4 experts through vLLM's Marlin W4A16 kernel",
)
"""vLLM's Marlin fused-MoE kernel (4-bit weights dequantised to 16-bit inside Ampere-style MMA tiles), which runs
MXFP4 experts where a launch asks for it (``VLLM_MXFP4_USE_MARLIN=1``, ``get_mxfp4_backend``, vllm/model_executor/
layers/quantization/mxfp4.py, 0.11+). The wheel times the same kernel on int4 experts (Kimi-K2.5's checkpoint):
its compute-bound rows give the slowdown, as :data:`W4A16_EXPERTS`' rows give the Triton kernel's."""
W4A16_MIN_COLUMNS = 256
"""Expert columns per rank of the rows fitted (gpt-oss's 2,880 at TP <= 8; the tables go to TP 32)."""
W4A16_SLOWDOWN_BOUNDS = (1.0, 8.0)
"""A dequantising kernel is no faster than the dense 16-bit GEMM it feeds, nor eight times slower."""


def w4a16_slowdown(
    shapes: MoEShapes, latency_s: np.ndarray, peak: float, bandwidth: float, dense: tuple
) -> tuple[float, float]:
    """(s, RMS log residual): the factor by which weight-only experts' compute ceiling falls below the dense
    16-bit GEMM's, as eff_max / s and m_half / s (``dense``: eff_max, m_half, hbm_efficiency, t_gemm): a few rows
    per expert (decode) cost what dense GEMMs do, many rows s times more. Least squares on log time."""
    eff, half, hbm, t0 = dense

    def residual(x: np.ndarray) -> np.ndarray:
        s = float(np.exp(x[0]))
        return np.log(moe_layer_time(shapes, peak, bandwidth, (eff / s, half / s, hbm, t0, 0.0)) / latency_s)

    lo, hi = (np.log(b) for b in W4A16_SLOWDOWN_BOUNDS)
    found = least_squares(residual, [np.log(1.5)], bounds=([lo], [hi]))
    return float(np.exp(found.x[0])), float(np.sqrt(np.mean(found.fun**2)))


def _fit_w4a16_experts(
    source: Source,
    gpu_id: str,
    kernels: dict,
    prov: dict,
    fits: dict,
    engines: tuple[str, ...] = ENGINES,
    base: dict | None = None,
    experts: WeightOnlyExperts = W4A16_EXPERTS,
) -> None:
    """``gemm_eff_max.<key>`` / ``gemm_m_half.<key>`` of ``experts`` (``w4a16``: the tables' MXFP4 kernel;
    ``w4a16_marlin``: vLLM's Marlin kernel): the dense 16-bit GEMM curve with its ceiling lowered by
    :func:`w4a16_slowdown`, fitted on the kernel's fused-MoE rows whose dense pricing is compute-bound (the rows where
    dequantising costs: at a few rows per expert the kernels stream weights as the dense path prices). ``engines``:
    whose tables to read (an engine's own, beside its own GEMM curve); ``base``: the fixed terms (HBM efficiency,
    fixed GEMM time) where ``kernels`` holds only curves."""
    hw = get_hardware(gpu_id)
    if "fp4" in hw.peak_flops or "bf16" not in kernels.get("gemm_eff_max", {}):
        return
    found = moe_rows(source, gpu_id, experts.dtype, experts.prefixes, engines=engines)
    if found is None:
        return
    table, kernel, rows = found
    # experts replicated (EP 1) and at most TP 8 (>= 256 columns per rank): with EP the power-law routing loads one
    # rank's experts unevenly, which is not the kernel's dequantising cost
    rows = rows[(rows["moe_ep_size"] == 1) & (rows["inter_size"] / rows["moe_tp_size"] >= W4A16_MIN_COLUMNS)]
    bandwidth, peak = hw.memory.bandwidth_bytes_s, hw.peak("bf16")
    eff, half = kernels["gemm_eff_max"]["bf16"], kernels["gemm_m_half"]["bf16"]
    fixed = base or kernels
    if "hbm_efficiency" not in fixed or "gemm_latency_s" not in fixed:
        return
    dense = (eff, half, fixed["hbm_efficiency"], fixed["gemm_latency_s"])
    vector_peak = hw.peak_flops.get("fp32", peak / 16.0)
    width = FORMATS[experts.width].bytes_per_element
    shapes = moe_shapes(rows, width, vector_peak, bandwidth, dense[2], dense[3])
    compute = (shapes.rows + half) / (shapes.rows * peak * eff)
    bound = np.asarray(shapes.gate_up[0] * compute > shapes.gate_up[1] / (bandwidth * dense[2]))
    if bound.sum() < 8:
        return
    chosen = rows[bound]
    latency = chosen["latency"].to_numpy(float) * 1e-3
    picked = moe_shapes(chosen, width, vector_peak, bandwidth, dense[2], dense[3])
    s, rms = w4a16_slowdown(picked, latency, peak, bandwidth, dense)
    edge = [] if s > W4A16_SLOWDOWN_BOUNDS[0] * (1 + BOUND_TOLERANCE) else [f"{experts.key} slowdown"]
    kernels["gemm_eff_max"][experts.key] = _g(eff / s)
    kernels["gemm_m_half"][experts.key] = _g(half / s)
    note = (
        f"{table} {experts.dtype} ({kernel}, {chosen['distribution'].iloc[0]}), {len(chosen)} compute-bound "
        f"EP 1 points, RMS log residual {rms:.3f}: the bf16 GEMM curve's ceiling / {s:.2f} ({experts.what})"
        f"{_at_bound({'at_bound': edge})}"
    )
    prov[f"gemm_eff_max.{experts.key}"] = prov[f"gemm_m_half.{experts.key}"] = note
    suffix = "" if engines == ENGINES else f".{engines[0]}"
    if experts.fused:
        fits[f"moe.{experts.fused}{suffix}"] = _fit_fused_weight_only(
            hw, rows, table, kernel, width, dense, experts, kernels, prov
        )
    fits[f"gemm.{experts.key}{suffix}"] = {
        "table": table,
        "kernel": kernel,
        "points": len(chosen),
        "rms_log_residual": round(rms, 4),
        "slowdown": round(s, 4),
        **_bound_entry({"at_bound": edge}),
    }


def _fit_fused_weight_only(
    hw: HardwareSpec,
    rows: Any,
    table: str,
    kernel: str,
    width: float,
    dense: tuple,
    experts: WeightOnlyExperts,
    kernels: dict,
    prov: dict,
) -> dict:
    """The fused-MoE form (:func:`fit_moe`) on all the EP 1 rows of a weight-only kernel, decode sizes included,
    under ``moe_*.<experts.fused>``: its own streaming rate and fixed time, where the lowered dense curve keeps the
    dense ones (the tables' MXFP4 kernels on Hopper stream far slower than dense GEMMs at a few rows per expert).
    Returns the fit's statistics for the profile's ``fits``."""
    bandwidth, peak = hw.memory.bandwidth_bytes_s, hw.peak("bf16")
    vector_peak = hw.peak_flops.get("fp32", peak / 16.0)
    shapes = moe_shapes(rows, width, vector_peak, bandwidth, dense[2], dense[3])
    r = fit_moe(shapes, rows["latency"].to_numpy(float) * 1e-3, peak, bandwidth)
    note = (
        f"{table} {experts.dtype} ({kernel}, {rows['distribution'].iloc[0]}), {r['points']} EP 1 points, "
        f"RMS log residual {r['rms_log_residual']:.3f}{_at_bound(r)}"
    )
    _store_moe(kernels, prov, experts.fused, r, note)
    return {
        "table": table,
        "dtype": experts.dtype,
        "kernel": kernel,
        "distribution": str(rows["distribution"].iloc[0]),
        "points": r["points"],
        "rms_log_residual": round(r["rms_log_residual"], 4),
        "ep_sizes": [1],
        **_bound_entry(r),
    }


GDN_START = (2e-6, 0.2, 1e-5)
GDN_LOWER, GDN_UPPER = (1e-8, 1e-3, 1e-7), (1e-4, 1.0, 1e-3)
"""Bounds of (seconds per chunk, efficiency, fixed seconds): physical ranges, far wider than the fits land."""


GDN_COLUMNS = ("phase", "kernel_source", "latency", "batch_size", "seq_len", "num_v_heads", "head_k_dim", "head_v_dim")
"""Columns of aiconfigurator's ``gdn_perf`` tables the fit reads."""


def fit_gdn(frame: Any, peak: float) -> dict | None:
    """(chunk seconds, efficiency, fixed seconds) of the gated-DeltaNet chunked prefill kernel, by least squares on
    log time over the table's context rows: ``max(ceil(S / 64) · t_chunk, FLOPs / (peak · eff)) + t0`` for B
    sequences of S tokens (FLOPs per token and value head as the op table counts them:
    :func:`~infercast.cost.attention_variants.gdn_prefill_flops`). None without such rows, or in a table without
    these columns (another release's layout: the roofline pricing stays)."""
    from infercast.cost.attention_variants import GDN_CHUNK, gdn_prefill_flops

    if not set(GDN_COLUMNS) <= set(frame.columns):
        return None
    rows = frame[
        (frame["phase"] == "context") & frame["kernel_source"].str.startswith("chunk") & (frame["latency"] > 0)
    ]
    if rows.empty:
        return None
    b, n, heads, dk, dv = (
        rows[c].to_numpy(float) for c in ("batch_size", "seq_len", "num_v_heads", "head_k_dim", "head_v_dim")
    )
    flops = b * n * heads * gdn_prefill_flops(dk, dv)
    chunks = np.ceil(n / GDN_CHUNK)
    latency = rows["latency"].to_numpy(float) * 1e-3

    def residual(x: np.ndarray) -> np.ndarray:
        t_chunk, eff, t0 = np.exp(x)
        return np.log((np.maximum(chunks * t_chunk, flops / (peak * eff)) + t0) / latency)

    names = ("gdn_chunk_s", "gdn_prefill_efficiency", "gdn_latency_s")
    params, rms, edge = _fit(residual, list(GDN_START), list(GDN_LOWER), list(GDN_UPPER), names)
    kernel = str(rows["kernel_source"].value_counts().index[0])
    return {
        "t_chunk": params[0],
        "eff": params[1],
        "points": len(rows),
        "rms_log_residual": rms,
        "at_bound": edge,
        "kernel": kernel,
    }


def _fit_gdn_table(
    source: Source, gpu_id: str, kernels: dict, prov: dict, fits: dict, engines: tuple[str, ...] = ENGINES
) -> None:
    """``gdn_chunk_s`` / ``gdn_prefill_efficiency`` from the newest ``linear_attention`` gated-DeltaNet table of the
    first of ``engines`` that has one (an engine's own beside its own GEMM curves)."""
    for engine in engines:
        path = latest(source.gpu(gpu_id) / "linear_attention" / engine, "gdn_perf.parquet")
        if path is None:
            continue
        r = fit_gdn(read_table(path), get_hardware(gpu_id).peak("bf16"))
        if r is None:
            continue
        table = relative(source, path)
        note = (
            f"{table} ({r['kernel']}, context), {r['points']} points, RMS log residual {r['rms_log_residual']:.3f}"
            f"{_at_bound(r)}"
        )
        kernels["gdn_chunk_s"], kernels["gdn_prefill_efficiency"] = _g(r["t_chunk"]), _g(r["eff"])
        prov["gdn_chunk_s"] = prov["gdn_prefill_efficiency"] = note
        key = "gdn" if engines == ENGINES else f"gdn.{engines[0]}"
        fits[key] = {
            "table": table,
            "kernel": r["kernel"],
            "points": r["points"],
            "rms_log_residual": round(r["rms_log_residual"], 4),
            **_bound_entry(r),
        }
        return


def build_kernel_profile(source: Source, gpu_id: str) -> dict[str, Any]:
    """The ``cost/profiles/kernels/<gpu>.yaml`` content for one GPU: collectives and fitted kernel parameters."""
    if not source.gpu(gpu_id).is_dir():
        raise InfercastError(f"{source.gpu(gpu_id)} is missing from the aiconfigurator tables", field="from")
    kernels, provenance, fits = fit_kernels(source, gpu_id)
    base = str(fits.get("gemm.bf16", {}).get("table", ""))
    engine_kernels, engine_provenance = fit_engine_gemms(source, gpu_id, base, fits, kernels) if base else ({}, {})
    return {
        "hardware": gpu_id,
        "source": f"aiconfigurator-core {source.version} systems/data/{GPU_DIRS[gpu_id]}",
        "kernels": kernels,
        "provenance": provenance,
        "engine_kernels": engine_kernels,
        "engine_provenance": engine_provenance,
        "fit": fits,
        "collectives": import_collectives(source, gpu_id),
    }


HEADER = """\
# Kernel parameters and collective latency curves of {gpu}, measured: imported from NVIDIA's
# aiconfigurator-core {version} kernel tables (Apache-2.0) by `infercast calibrate --from aiconfigurator`.
# Do not edit by hand: re-run that command. Collective curves are raw medians per message size (bytes, us);
# infercast lowers spikes to the next bigger size's time when it loads them (monotone curves).
"""


def write_kernel_profile(data: dict[str, Any], path: Path) -> Path:
    """Write one kernel profile YAML (compact: curves as flow lists)."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _list(dumper: yaml.SafeDumper, value: list) -> Any:
        flow = all(isinstance(v, int | float) for v in value)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)

    _Dumper.add_representer(list, _list)
    path.parent.mkdir(parents=True, exist_ok=True)
    version = data["source"].split()[1] if data.get("source") else "?"
    text = HEADER.format(gpu=data["hardware"], version=version)
    text += yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=120)
    path.write_text(text)
    return path
