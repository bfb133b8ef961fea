"""Kernel-level views of the cost parameters: one GEMM, one copy, one launch.

They apply the same roofline and fitted efficiencies as the step model (:mod:`infercast.cost.step`) to
micro-benchmarks, so measured GEMM and copy rates calibrate the same parameters the step model uses.
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
    """Seconds for (m x k) @ (k x n) computing in ``key``, launched eagerly."""
    eff_max, m_half = profile.gemm_params(key)
    rows = max(m, profile.gemm_m_floor)
    eff = eff_max * rows / (rows + m_half)
    compute = 2.0 * m * n * k / (hw.peak(key) * eff)
    memory = ((m * k + k * n) * in_bytes + m * n * out_bytes) / (hw.memory.bandwidth_bytes_s * profile.hbm_efficiency)
    return max(compute, memory) + profile.kernel_overhead_eager_s


def copy_time(profile: CostProfile, hw: HardwareSpec, nbytes: float) -> float:
    """Seconds for a device-to-device copy moving ``nbytes`` (read + write)."""
    return nbytes / (hw.memory.bandwidth_bytes_s * profile.hbm_efficiency) + profile.kernel_overhead_eager_s
