"""Chunked prefill with stall-free batching (Sarathi-Serve; the default of vLLM V1 and SGLang).

Every step first gives each running sequence its decode token, then fills the rest of the token budget
with prefill: chunks of partly prefilled requests first, then new requests in arrival order, the last one
cut to fit. Decodes never wait for a long prompt.
"""

from __future__ import annotations

from infercast.sim.scheduler.base import DECODE_ONLY, Plan, ReplicaView


class ChunkedPrefillScheduler:
    name = "chunked"
    continuous = True
    reserves = False

    def plan(self, rep: ReplicaView) -> Plan | None:
        waiting, prefilling, running = rep.waiting, rep.prefilling, rep.num_running
        if not waiting and not prefilling:
            return DECODE_ONLY if running else None
        budget = rep.max_batched_tokens - running
        items: list[tuple[int, int]] = []
        if prefilling:
            for i in list(prefilling):
                if budget <= 0:
                    break
                chunk = rep.grow(i, budget)
                if not chunk:
                    break
                items.append((i, chunk))
                budget -= chunk
        room = rep.max_seqs - running - len(prefilling)
        while budget > 0 and waiting and room > 0:
            i = waiting[0]
            admitted = rep.admit(i, budget)
            if admitted is None:
                break
            items.append((i, admitted))
            budget -= admitted
            room -= 1
        if items or running:
            return Plan(items, decode=running > 0)
        return None
