"""Fit infercast's kernel parameters to the GEMM and attention tables of aiconfigurator-core.

The functional forms are the step model's (:mod:`infercast.cost.step`), with a measured fixed time per kernel:

* GEMM (M x K) @ (K x N):  ``max(2MNK / (peak · eff_max · M/(M + m_half)),  bytes / (HBM · hbm_eff)) + t_gemm``
* decode attention:        ``KV bytes / (HBM · attn_decode_eff) + t_attn_decode + sequences · t_seq``
* prefill attention:       ``causal FLOPs / (peak · attn_prefill_eff) + t_attn_prefill``

Each is fitted by least squares on log time over every row of the newest table of one engine (vLLM's where
present: its GEMMs are cuBLAS through torch, as SGLang's), and reports points and RMS log residual.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import least_squares

from infercast.measure.aiconfigurator import Source, latest, read_table, relative
from infercast.specs.catalog import get_hardware

ENGINES = ("vllm", "sglang", "trtllm")
"""Engine folders searched for kernel tables, in order of preference."""

GEMM_SOURCES = {"bf16": ("bfloat16", ("torch.nn.functional.linear", "torch")), "fp8": ("fp8", ("Cutlass",))}
"""infercast compute key -> (gemm_dtype in the table, kernel_source prefixes accepted)."""

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


def _fit(residual: Any, start: list[float], lower: list[float], upper: list[float]) -> tuple[np.ndarray, float]:
    """Least squares on log residuals; returns the parameters and the RMS log residual."""
    res = least_squares(residual, np.log(start), bounds=(np.log(lower), np.log(upper)), method="trf")
    r = residual(res.x)
    return np.exp(res.x), float(np.sqrt(np.mean(r**2)))


def fit_gemm(frame: Any, peak: float, bandwidth: float, dtype: str, sources: tuple[str, ...], width: float) -> dict:
    """(eff_max, m_half, hbm_eff, t0) of one GEMM dtype; ``width``: bytes per weight/activation element."""
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
    flops = 2 * m * n * k
    nbytes = (m * k + k * n) * width + m * n * 2.0  # outputs in 16 bits
    rows_eff = np.maximum(m, M_FLOOR)

    def model(x: np.ndarray) -> np.ndarray:
        eff, half, hbm, t0 = np.exp(x)
        return np.maximum(flops / (peak * eff * rows_eff / (rows_eff + half)), nbytes / (bandwidth * hbm)) + t0

    params, rms = _fit(lambda x: np.log(model(x) / t), [0.8, 64.0, 0.85, 3e-6], [0.05, 0.5, 0.3, 1e-8],
                       [1.0, 8192.0, 1.0, 5e-5])  # fmt: skip
    return {"eff_max": params[0], "m_half": params[1], "hbm": params[2], "t0": params[3], "points": len(rows),
            "rms_log_residual": rms, "kernel": str(kernel)}  # fmt: skip


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

    params, rms = _fit(residual, [0.8, 8e-6, 1e-7], [0.1, 1e-8, 1e-10], [1.0, 1e-4, 1e-5])
    return {"eff": params[0], "t0": params[1], "t_seq": params[2], "points": len(rows), "rms_log_residual": rms,
            "kernel": str(rows["kernel_source"].iloc[0])}  # fmt: skip


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

    params, rms = _fit(residual, [0.5, 1e-5], [0.02, 1e-8], [1.0, 1e-3])
    return {"eff": params[0], "t0": params[1], "points": len(rows), "rms_log_residual": rms,
            "kernel": str(rows["kernel_source"].iloc[0])}  # fmt: skip


def _g(x: float) -> float:
    return float(f"{x:.4g}")


def fit_kernels(source: Source, gpu_id: str) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """(kernel parameter values, provenance per parameter, fit statistics) for one GPU."""
    hw = get_hardware(gpu_id)
    bandwidth = hw.memory.bandwidth_bytes_s
    kernels: dict[str, Any] = {}
    prov: dict[str, str] = {}
    fits: dict[str, Any] = {}
    gemm = _newest(source, gpu_id, "gemm", "gemm_perf.parquet")
    if gemm is not None:
        table, frame = gemm
        for key, (dtype, prefixes) in GEMM_SOURCES.items():
            if key not in hw.peak_flops:
                continue
            r = fit_gemm(frame, hw.peak(key), bandwidth, dtype, prefixes, 1.0 if key == "fp8" else 2.0)
            if not r:
                continue
            note = (f"{table} {dtype} ({r['kernel']}), {r['points']} points, "
                    f"RMS log residual {r['rms_log_residual']:.3f}")  # fmt: skip
            kernels.setdefault("gemm_eff_max", {})[key] = _g(r["eff_max"])
            kernels.setdefault("gemm_m_half", {})[key] = _g(r["m_half"])
            prov[f"gemm_eff_max.{key}"] = prov[f"gemm_m_half.{key}"] = note
            fits[f"gemm.{key}"] = {"table": table, "dtype": dtype, "kernel": r["kernel"], "points": r["points"],
                                   "rms_log_residual": round(r["rms_log_residual"], 4),
                                   "hbm_efficiency": _g(r["hbm"]), "latency_s": _g(r["t0"])}  # fmt: skip
            if key == "bf16":  # the streaming efficiency and fixed GEMM time come from the 16-bit GEMMs
                kernels["hbm_efficiency"] = _g(r["hbm"])
                kernels["gemm_latency_s"] = _g(r["t0"])
                prov["hbm_efficiency"] = prov["gemm_latency_s"] = note
    attn = _newest(source, gpu_id, "attention", "generation_attention_perf.parquet")
    if attn is not None:
        table, frame = attn
        r = fit_decode_attention(frame, bandwidth)
        if r:
            note = f"{table} ({r['kernel']}), {r['points']} points, RMS log residual {r['rms_log_residual']:.3f}"
            kernels["attn_decode_efficiency"] = _g(r["eff"])
            kernels["attn_decode_latency_s"] = _g(r["t0"])
            kernels["attn_decode_seq_s"] = _g(r["t_seq"])
            prov["attn_decode_efficiency"] = prov["attn_decode_latency_s"] = prov["attn_decode_seq_s"] = note
            fits["attention.decode"] = {"table": table, "kernel": r["kernel"], "points": r["points"],
                                        "rms_log_residual": round(r["rms_log_residual"], 4)}  # fmt: skip
    attn = _newest(source, gpu_id, "attention", "context_attention_perf.parquet")
    if attn is not None:
        table, frame = attn
        key = "bf16" if "bf16" in hw.peak_flops else "fp16"
        r = fit_prefill_attention(frame, hw.peak(key))
        if r:
            note = f"{table} ({r['kernel']}), {r['points']} points, RMS log residual {r['rms_log_residual']:.3f}"
            kernels["attn_prefill_efficiency"] = _g(r["eff"])
            kernels["attn_prefill_latency_s"] = _g(r["t0"])
            prov["attn_prefill_efficiency"] = prov["attn_prefill_latency_s"] = note
            fits["attention.prefill"] = {"table": table, "kernel": r["kernel"], "points": r["points"],
                                         "rms_log_residual": round(r["rms_log_residual"], 4)}  # fmt: skip
    return kernels, prov, fits
