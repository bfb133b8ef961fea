"""Chunked prefill with stall-free batching (Sarathi-Serve; the default of vLLM V1 and SGLang).

Every step first gives each running sequence its decode token, then fills the rest of the token budget
with prefill: chunks of partly prefilled requests first, then new requests in arrival order, the last one
cut to fit. Decodes never wait for a long prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infercast.sim.scheduler.base import DECODE_ONLY, Plan

if TYPE_CHECKING:
    from infercast.sim.replica import Replica


class ChunkedPrefillScheduler:
    name = "sarathi"
    continuous = True

    def plan(self, rep: Replica) -> Plan | None:
        if not rep.waiting and not rep.prefilling:
            return DECODE_ONLY if rep.run.n else None
        budget = rep.max_batched_tokens - rep.num_running
        items: list[tuple[int, int]] = []
        for i in list(rep.prefilling):
            if budget <= 0:
                break
            chunk = rep.grow(i, budget)
            if not chunk:
                break
            items.append((i, chunk))
            budget -= chunk
        while budget > 0 and rep.waiting and rep.num_seqs < rep.max_seqs:
            chunk = rep.admit(rep.waiting[0], budget)
            if chunk is None:
                break
            items.append((rep.prefilling[-1], chunk))
            budget -= chunk
        if items or rep.num_running:
            return Plan(items, decode=rep.num_running > 0)
        return None
