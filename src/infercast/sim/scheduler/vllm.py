"""Continuous batching with prefill-first steps (vLLM V0 without chunked prefill).

When waiting requests fit (sequence slots, token budget, KV blocks for the whole prompt), the step
prefills as many of them as the token budget allows and running decodes wait; otherwise every running
sequence decodes one token. Prefills therefore stall decodes: the inter-token gaps chunked prefill removes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infercast.sim.scheduler.base import DECODE_ONLY, Plan

if TYPE_CHECKING:
    from infercast.sim.replica import Replica


class PrefillFirstScheduler:
    name = "vllm"
    continuous = True

    def plan(self, rep: Replica) -> Plan | None:
        if not rep.waiting:
            return DECODE_ONLY if rep.run.n else None
        items: list[tuple[int, int]] = []
        budget = rep.max_batched_tokens
        while rep.waiting and rep.num_seqs < rep.max_seqs and budget > 0:
            # whole prompts only; the first may exceed the budget (V0 requires budget >= max model length)
            chunk = rep.admit(rep.waiting[0], None, limit=budget if items else None)
            if chunk is None:
                break
            items.append((rep.prefilling[-1], chunk))
            budget -= chunk
        if items:
            return Plan(items, decode=False)
        return DECODE_ONLY if rep.run.n else None
