"""Continuous batching with prefill-first steps (vLLM V0 without chunked prefill).

When waiting requests fit (sequence slots, token budget, KV blocks for the whole prompt), the step
prefills as many of them as the token budget allows and running decodes wait; otherwise every running
sequence decodes one token. Prefills therefore stall decodes: the inter-token gaps chunked prefill removes.
"""

from __future__ import annotations

from infercast.sim.scheduler.base import DECODE_ONLY, Plan, ReplicaView


class PrefillFirstScheduler:
    name = "prefill-first"
    continuous = True
    reserves = False

    def plan(self, rep: ReplicaView) -> Plan | None:
        waiting = rep.waiting
        if not waiting:
            return DECODE_ONLY if rep.num_running else None
        items: list[tuple[int, int]] = []
        budget = rep.max_batched_tokens
        while waiting and rep.num_seqs < rep.max_seqs and budget > 0:
            # whole prompts only; the first may exceed the budget (V0 requires budget >= max model length)
            i = waiting[0]
            chunk = rep.admit(i, None, limit=budget if items else None)
            if chunk is None:
                break
            items.append((i, chunk))
            budget -= chunk
        if items:
            return Plan(items, decode=False)
        return DECODE_ONLY if rep.num_running else None
