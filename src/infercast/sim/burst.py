"""After a closed-loop run: how much of its mean TTFT is the opening burst? Every client sends its first request at
once, so those prompts queue behind each other for prefill, and their TTFT can outweigh all the later ones. The mean
that ``vllm bench serve`` reports counts them, so the simulator does too; this note says when that burst is most of
the mean, and what the requests after it saw, since a figure that hangs on how many requests follow the burst is not
a steady-state one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from infercast.sim.state import RequestTable

BURST_SHARE = 0.5
"""The opening burst's share of the summed TTFT above which the mean is 'mostly the burst' (as
:data:`infercast.sim.cliff.QUEUE_SHARE` for queueing)."""


def opening_burst(table: RequestTable, clients: int | None) -> dict[str, Any] | None:
    """``{"requests", "ttft_mean_s", "rest_ttft_mean_s", "share", "message"}`` when a closed loop of ``clients`` ran
    more requests than clients and its first ``clients`` requests (by arrival) hold at least :data:`BURST_SHARE`
    of the summed TTFT; None otherwise (open loops included)."""
    if not clients:
        return None
    arrival = np.asarray(table.arrival, dtype=float)
    ttft = np.asarray(table.first_token, dtype=float) - arrival
    done = np.isfinite(ttft)
    if int(done.sum()) <= clients:
        return None
    first = np.zeros(len(arrival), dtype=bool)
    first[np.argpartition(arrival, clients - 1)[:clients]] = True  # O(n): a million-request run pays nothing
    burst, rest = ttft[first & done], ttft[~first & done]
    total = float(burst.sum() + rest.sum())
    if not burst.size or not rest.size or total <= 0.0:
        return None
    share = float(burst.sum()) / total
    if share < BURST_SHARE:
        return None
    burst_mean, rest_mean = float(burst.mean()), float(rest.mean())
    message = (
        f"{share:.0%} of the mean TTFT is the opening burst: the {clients} clients send at once, and those first "
        f"requests average {burst_mean:.3g} s to the first token against {rest_mean:.3g} s for the {rest.size:,} "
        "after them. "
        "The mean falls toward the later figure as requests per client grow (--num-requests)"
    )
    return {
        "requests": clients,
        "ttft_mean_s": burst_mean,
        "rest_ttft_mean_s": rest_mean,
        "share": round(share, 3),
        "message": message,
    }
