"""After a run: is its TTFT dominated by queueing for KV blocks or batch slots (a cliff)? Say why in one line and
what removes it (issue 36 part 3), so a TTFT of minutes never comes without its cause.

A run is on a cliff when its requests spent most of their mean TTFT in the waiting queue
(:meth:`RequestTable.queue_delay`) and that queueing is more than :data:`MIN_QUEUE_S`. The cause: the KV pool
when it holds fewer requests at their full context (prompt + output) than the clients or the batch limit; the
batch limit (``max_num_seqs``) when it is below the clients. Queueing for steps alone (prompts waiting their
turn to prefill) is not a cliff: it grows smoothly with load."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from infercast.sim.replica import Replica
    from infercast.sim.state import RequestTable

QUEUE_SHARE = 0.5
"""Mean queueing over mean TTFT above which TTFT is 'dominated' by queueing."""
MIN_QUEUE_S = 0.05
"""Queueing below this is not a cliff whatever its share (short prompts on an idle engine)."""


def find_cliff(table: RequestTable, replica: Replica, clients: int | None) -> dict[str, Any] | None:
    """``{"cause": "kv" | "slots", "queue_share", "kv_pool_holds", "message"}`` when the run's TTFT is dominated
    by queueing; None otherwise. ``clients``: the closed loop's clients (None: open loop)."""
    ttft = np.asarray(table.first_token) - np.asarray(table.arrival)
    queue = table.queue_delay()
    ok = np.isfinite(ttft) & np.isfinite(queue)
    if not ok.any():
        return None
    mean_ttft, mean_queue = float(ttft[ok].mean()), float(queue[ok].mean())
    if mean_queue < MIN_QUEUE_S or mean_queue < QUEUE_SHARE * mean_ttft:
        return None
    need = float(np.mean(np.asarray(table.prompt) + np.asarray(table.output)))
    held = int(replica.kv.num_blocks * replica.bs // max(need, 1.0))
    want = min(clients or _peak_in_flight(table), replica.max_seqs)
    share = mean_queue / mean_ttft
    who = f"{clients} clients" if clients else f"the {want} requests in flight at the peak"
    if held < want:
        cause = "kv"
        message = (
            f"KV pool holds {held} of {who} at {need / 1000:.1f}k tokens each: TTFT is {share:.0%} queueing for KV "
            f"blocks; {_kv_remedy(replica, need, want)}"
        )
    elif clients and replica.max_seqs < clients:
        cause = "slots"
        message = (
            f"batch limit max_num_seqs {replica.max_seqs} holds {replica.max_seqs} of {clients} clients: TTFT is "
            f"{share:.0%} queueing for a batch slot; --max-num-seqs {clients} (or --launch with it) holds all"
        )
    else:
        return None  # queueing for steps, not for memory or slots (an open loop past capacity: 'near saturation')
    return {"cause": cause, "queue_share": round(share, 3), "kv_pool_holds": held, "message": message}


def _kv_remedy(replica: Replica, need: float, want: int) -> str:
    """The layouts whose memory budget holds ``want`` requests of ``need`` tokens (:func:`memory.what_would_fit`:
    a wider TP, a narrower weight format, an 8-bit KV cache), as the flags that change."""
    from infercast.memory import what_would_fit

    layouts = what_would_fit(replica.deployment, context=max(int(need), 1), concurrency=want)
    if not layouts:
        return "shorter requests or fewer clients remove it"
    return " or ".join(str(f["flags"]) for f in layouts) + " holds all"


def _peak_in_flight(table: RequestTable) -> int:
    """The most requests between arrival and finish at once (an open loop's load on the engine)."""
    start, end = np.asarray(table.arrival, dtype=float), np.asarray(table.finish, dtype=float)
    times = np.concatenate([start, np.where(np.isfinite(end), end, np.inf)])
    steps = np.concatenate([np.ones(len(start)), -np.ones(len(end))])
    order = np.lexsort((steps, times))  # a finish before an arrival at the same instant
    return int(np.cumsum(steps[order]).max(initial=0))
