"""Kernel-level views of the cost parameters: one GEMM, one copy, one launch.

They apply the same roofline and fitted efficiencies as the step model (:mod:`infercast.cost.step`) to
micro-benchmarks, so measured GEMM and copy rates calibrate the same parameters the step model uses. They do
not call the step model's code; :func:`gemm_time` says why and where the two differ.
"""

from __future__ import annotations

from infercast.cost.profile import CostProfile
from infercast.specs.hardware import HardwareSpec


def gemm_time(
    profile: CostProfile,
    hw: HardwareSpec,
    key: str,
    m: float,
    n: float,
    k: float,
    in_bytes: float = 2.0,
    out_bytes: float = 2.0,
) -> float:
    """Seconds for (m x k) @ (k x n) computing in ``key``, launched eagerly: the GEMM records of calibration.

    Same parameters and form as a GEMM row of the step model (``StepCostModel``): compute ``2mnk`` FLOPs at
    ``gemm_params(key)`` efficiency ``eff_max · M / (M + m_half)`` of ``hw.peak(key)`` with M floored at
    ``gemm_m_floor``; bytes over HBM at ``hbm_efficiency``; the larger of the two plus one eager launch.

    It does not call the step model's code, because that would change what calibration fits from: the step model
    prices a GEMM as one row of a deployment's operator table (it needs a model, scheme and engine; a GEMM record
    has none) and adds per kernel the measured fixed time ``gemm_latency_s`` (3.86 us on H100 SXM, from the
    aiconfigurator GEMM tables) and a graph-or-eager launch chosen by the step's token count. Routed through it,
    every GEMM record's prediction would gain ``gemm_latency_s`` (about 0.3 % of the 8192^3 reference GEMMs,
    six times the 0.66 us in which a 1024 x 1024 bf16 weight streams at M = 1), and the arithmetic runs in
    another order, so the two agree to rounding, not bit for bit (``tests/test_cost.py`` checks that they agree
    on a model's GEMM shapes).

    Bytes: ``(m·k + k·n) · in_bytes`` read (activations and weights) and ``m·n · out_bytes`` written. The 2-byte
    defaults are the 16-bit operands and output of the GEMMs the records time: ``harness/microbench.py``
    (``_gemm_fn``) runs ``F.linear`` on bf16/fp16 tensors, and the published reference GEMMs
    (``data/measurements/published/reference.csv``: 8192^3 on H100 SXM and H200) are bf16. The step model counts
    the same bytes for a bf16/fp16 scheme: weights at the scheme's weight format and rows in and out at its
    activation format, 2 bytes each (``cost/operators.py``). ``calibrate/predict.py`` passes the bytes of other
    records' GEMMs (fp8: 1-byte e4m3 operands, bf16 output; fp32: 4 and 4).
    """
    eff_max, m_half = profile.gemm_params(key)
    rows = max(m, profile.gemm_m_floor)
    eff = eff_max * rows / (rows + m_half)
    compute = 2.0 * m * n * k / (hw.peak(key) * eff)
    memory = ((m * k + k * n) * in_bytes + m * n * out_bytes) / (hw.memory.bandwidth_bytes_s * profile.hbm_efficiency)
    return max(compute, memory) + profile.kernel_overhead_eager_s


def copy_time(profile: CostProfile, hw: HardwareSpec, nbytes: float) -> float:
    """Seconds for a device-to-device copy moving ``nbytes`` (read + write)."""
    return nbytes / (hw.memory.bandwidth_bytes_s * profile.hbm_efficiency) + profile.kernel_overhead_eager_s
