"""Does a run keep up with its offered load? One test, shared by ``simulate``'s summary and ``rate_sweep``.

Over the arrival window (after a warm-up), a stable system completes requests as fast as they arrive; a
saturated one falls behind and its queueing delay keeps growing. A finite run can meet its SLOs while its
queue is still growing, so both signs are checked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from infercast.sim.state import RequestTable
from infercast.sim.workload import Workload

MIN_REQUESTS = 50
"""Runs with fewer requests are not judged at all: a handful of arrivals cannot tell a trend from noise."""
WARMUP_FRACTION = 0.25
"""The first quarter of the arrivals is skipped: an empty system starts ahead of the load."""
KEEP_UP = 0.95
"""Served / arrived over the window below this is saturation: a load 5% over capacity serves ~1/1.05 of what
arrives, so the saturation point is found within ~5%; stable runs of a few hundred requests or more stay
within a few percent of 1 once completions are lagged by the typical latency (below)."""
MIN_WINDOW_ARRIVALS = 150
"""The served/arrived test needs this many arrivals in the window: over fewer, stable runs scatter by more
than the 5% it tests (about ±15% at 75 arrivals); shorter runs are judged by queue growth alone."""
TAIL_FRACTION = 0.1
"""Queueing delay is compared between the first and the last tenth of the requests by arrival."""
QUEUE_GROWTH = 0.05
"""Saturation if the mean queueing delay grows by more than this many seconds per second of arrivals
(the queue gains 1 s every 20 s of run: it would grow without bound in a longer run)..."""
MIN_LATE_QUEUE_S = 1.0
"""... and the late requests wait more than this long: growth in milliseconds is noise, not a backlog."""


def saturation(table: RequestTable, work: Workload) -> dict[str, Any]:
    """``saturated`` (bool) with the evidence: offered and served rates, served/arrived, and a reason.

    Closed-loop runs are never saturated (the clients wait for their answers). Queueing delay is
    :meth:`RequestTable.queue_delay`.
    """
    if work.closed_loop or table.n < MIN_REQUESTS:
        return {"saturated": False}
    order = np.argsort(table.arrival)
    arrive = table.arrival[order]
    span = float(arrive[-1] - arrive[0])
    latency = table.finish - table.arrival
    first_token = table.first_token - table.arrival
    if span <= 0 or (np.isfinite(first_token).any() and span < float(np.nanmin(first_token))):
        return _burst(table, span)  # all arrive before any first token: rate=inf and rate=1e30 alike
    warm = int(len(arrive) * WARMUP_FRACTION)
    start, stop = float(arrive[warm]), float(arrive[-1])
    window = max(stop - start, 1e-12)
    # completions trail arrivals by about one request's latency: compare against the window shifted by that
    lag = float(np.nanmedian(latency[order[:warm]])) if warm else 0.0
    # ... and never into the drain after the last arrival, when a backlog empties at full speed
    lag = min(lag, 0.5 * window)
    arrived = int(np.count_nonzero((arrive >= start) & (arrive <= stop - lag)))
    served = int(np.count_nonzero((table.finish >= start + lag) & (table.finish <= stop)))
    keep_up = served / arrived if arrived else 1.0
    queue = table.queue_delay()[order]
    tail = max(int(len(queue) * TAIL_FRACTION), 1)
    early, late = float(np.nanmean(queue[:tail])), float(np.nanmean(queue[-tail:]))
    offered = (table.n - 1) / span
    growing = (late - early) / span > QUEUE_GROWTH and late > MIN_LATE_QUEUE_S
    judged = len(arrive) - warm >= MIN_WINDOW_ARRIVALS  # arrivals in the window
    saturated = (judged and keep_up < KEEP_UP) or growing
    out: dict[str, Any] = {
        "saturated": bool(saturated),
        "offered_rate_req_s": offered,
        "served_to_arrived": keep_up,
        "served_rate_req_s": served / window,
    }
    if saturated:
        out["saturation_reason"] = (
            f"served {keep_up:.0%} of the requests that arrived over the run and queueing delay grew from "
            f"{early:.2f} s to {late:.2f} s: the offered {offered:.2f} req/s exceeds what this configuration serves"
        )
    return out


def _burst(table: RequestTable, span: float) -> dict[str, Any]:
    """Every request arrives before the first one could finish (``offline``, ``rate=inf`` or a rate so high it
    is the same, e.g. 1e30): one verdict for all of them. The offered rate is unbounded, so the run is
    saturated when a backlog formed (the last requests queued more than :data:`MIN_LATE_QUEUE_S`), and not
    when the whole burst was admitted at once."""
    queue = table.queue_delay()
    order = np.argsort(table.arrival, kind="stable")
    tail = max(int(len(queue) * TAIL_FRACTION), 1)
    late = float(np.nanmean(queue[order][-tail:]))
    saturated = late > MIN_LATE_QUEUE_S
    out: dict[str, Any] = {"saturated": bool(saturated), "offered_rate_req_s": float("inf")}
    if saturated:
        out["saturation_reason"] = (
            f"all {table.n} requests arrived within {span:.3g} s (a burst: an unbounded offered rate) and the last "
            f"waited {late:.2f} s in the queue: the offered load exceeds what this configuration serves "
            "(request_throughput_req_s is its capacity)"
        )
    return out
