"""Arrival processes with the definitions of ``vllm bench serve``."""

from __future__ import annotations

import math

import numpy as np

from infercast.errors import InfercastError, require_positive_int, require_positive_number, unknown_choice
from infercast.sim.workload.core import MAX_ARRIVAL_SECONDS, RngLike, _rng

ARRIVAL_KINDS = ("poisson", "gamma", "constant", "offline")


def arrivals(
    kind: str,
    n: int,
    rate: float | None = None,
    burstiness: float = 1.0,
    rng: RngLike = None,
    *,
    normalize: bool = True,
) -> np.ndarray:
    """``n`` non-decreasing arrival times (seconds) at mean ``rate`` requests/s.

    Matches ``vllm bench serve`` (``get_request`` in vllm/benchmarks/serve.py, vllm-project/vllm):

    * inter-arrival gaps are ``Gamma(shape=burstiness, scale=1 / (rate * burstiness))`` — mean ``1/rate``,
      coefficient of variation ``1/sqrt(burstiness)``; burstiness 1 is exponential (Poisson process), < 1 is
      burstier, > 1 smoother. ``poisson`` is the same draw with shape 1, so like vLLM, ``poisson`` with
      burstiness != 1 *is* the gamma process;
    * one gap is drawn per request and the times are their cumulative sum, so the first request arrives
      after one gap, not at t=0 (vLLM waits ``delay_ts[0]`` before the first send; the older
      ``benchmarks/benchmark_serving.py`` sent the first one at once and slept a gap after each send —
      subtract ``t[0]`` for that);
    * ``normalize=True`` then rescales the times so the last one is exactly ``n / rate``, as vLLM does
      without a ramp-up (it keeps throughput comparable across seeds). ``normalize=False`` gives the raw
      renewal process;
    * ``constant``: gaps exactly ``1/rate`` (vLLM's burstiness = inf), times ``1/rate, 2/rate, ...``;
    * ``offline`` (or ``rate=inf``, vLLM's default): everything at t=0.

    vLLM draws from NumPy's global legacy RNG; here ``rng`` is a ``numpy.random.Generator`` (or a seed), so
    the distribution matches but not the exact numbers.
    """
    if not isinstance(kind, str) or kind.lower() not in ARRIVAL_KINDS:
        raise unknown_choice("arrival", str(kind), ARRIVAL_KINDS)
    kind = kind.lower()
    n = require_positive_int("num_requests", n)
    b = require_positive_number("burstiness", burstiness, allow_inf=True)
    if kind == "offline":
        return np.zeros(n)
    if rate is None:
        raise InfercastError(
            f"required for arrival={kind!r} (requests/s); use arrival='offline' or concurrency=N otherwise",
            field="rate",
        )
    r = require_positive_number("rate", rate, allow_inf=True)
    if math.isinf(r):
        return np.zeros(n)
    if not n / r <= MAX_ARRIVAL_SECONDS:
        raise InfercastError(
            f"{n:,} requests at {r:g} req/s arrive over {n / r:.3g} s, past the {MAX_ARRIVAL_SECONDS:g} s a "
            "simulation's clock resolves; raise the rate or send fewer requests",
            field="rate",
        )
    if kind == "constant" or math.isinf(b):
        return np.arange(1, n + 1, dtype=np.float64) / r
    # Source: vllm-project/vllm, vllm/benchmarks/serve.py get_request() (read at commit def9ce85ba10;
    # the legacy benchmarks/benchmark_serving.py at 0049e29c41fd draws the same gamma interval but yields the
    # first request before sleeping, and does not rescale): theta = 1.0 / (request_rate * burstiness);
    # delay_ts.append(np.random.gamma(shape=burstiness, scale=theta)); cumulative sum; then
    # delay_ts *= (total_requests / request_rate) / delay_ts[-1]  (when no ramp-up strategy is set).
    scale = 1.0 / (r * b) if r * b > 0 else math.inf
    if not 0 < scale < math.inf:
        raise InfercastError(
            f"{r:g} req/s with burstiness {b:g} gives inter-arrival gaps of 1 / (rate x burstiness) = {scale:g} s, "
            "which a float cannot hold",
            field="burstiness",
        )
    gaps = _rng(rng).gamma(shape=b, scale=scale, size=n)
    times = np.cumsum(gaps)
    if normalize and times[-1] > 0:
        times *= (n / r) / times[-1]
    elif not times[-1] <= MAX_ARRIVAL_SECONDS:
        raise InfercastError(
            f"the last of {n:,} arrivals at {r:g} req/s falls at {times[-1]:.3g} s, past the "
            f"{MAX_ARRIVAL_SECONDS:g} s a simulation's clock resolves",
            field="rate",
        )
    return times
