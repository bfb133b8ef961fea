"""Before a run: refuse requests that can never fit a replica's KV cache, whatever the scheduler.

A request needs, at its last step, the KV blocks of its whole context (prompt + output; window-capped on
sliding layers, as the replica's ledger counts them) and, on hybrid models, its fixed linear-attention state.
If that is more than a replica's entire pool it can never be admitted: schedulers would wait for it forever (the
disaggregated pools looped without end; the colocated ones returned ``completed 0 of N`` with null
latencies). One check, here, for every scheduler and pool, names the first such request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from infercast.errors import DoesNotFitError

if TYPE_CHECKING:
    from infercast.sim.replica import Replica
    from infercast.sim.state import RequestTable


def refuse_unservable(table: RequestTable, replicas: Sequence[Replica], *, decode: bool = True) -> None:
    """Raise :class:`DoesNotFitError` naming the first request whose peak KV need exceeds the smallest pool of
    ``replicas``. ``decode=False``: a prefill-only pool (disaggregated), which holds only the prompt."""
    if not replicas or table.n == 0:
        return
    rep = min(replicas, key=lambda r: r.kv.num_blocks)
    tokens = np.asarray(table.prompt, dtype=np.int64)
    if decode:  # (speculative steps draft no further than the output's end: no extra lookahead blocks)
        tokens = tokens + np.asarray(table.output, dtype=np.int64)
    need = rep.blocks.rule.count_array(tokens) + rep.blocks.state_blocks
    bad = need > rep.kv.num_blocks
    if not bad.any():
        return
    i = int(np.argmax(bad))
    pool = "" if decode else "prefill "
    raise DoesNotFitError(
        f"request {i} ({int(table.prompt[i])} prompt + {int(table.output[i])} output tokens) needs {int(need[i])} KV "
        f"blocks of {rep.bs} tokens but a {pool}replica holds {rep.kv.num_blocks} ({int(bad.sum())} of "
        f"{table.n} requests cannot fit); shorten the requests, or add memory (`gpu_memory_utilization`, `tp`, "
        "a narrower `kv_precision`)",
        field="workload",
    )
