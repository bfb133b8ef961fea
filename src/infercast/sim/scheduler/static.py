"""Static (request-level) batching: a batch is formed when the engine is idle and runs to completion.

Up to ``max_num_seqs`` waiting requests whose whole prompt + output fit in the KV cache join a batch (their
full length is reserved, so nothing is ever preempted). The batch prefills (the first prompt whole, the
rest within the token budget), then decodes until its last request finishes; finished requests drop out
(no padding compute is charged) but nobody joins until the batch is empty.
"""

from __future__ import annotations

from infercast.sim.scheduler.base import Plan, ReplicaView


class StaticScheduler:
    name = "static"
    continuous = False
    reserves = True

    def plan(self, rep: ReplicaView) -> Plan | None:
        if not rep.prefilling and not rep.num_running:
            while rep.waiting and rep.num_seqs < rep.max_seqs:
                if rep.admit(rep.waiting[0], 0, reserve=True) is None:
                    break
        if rep.prefilling:
            items: list[tuple[int, int]] = []
            budget = rep.max_batched_tokens
            for i in list(rep.prefilling):
                chunk = rep.grow(i, budget if items else None)
                if not chunk:
                    break
                items.append((i, chunk))
                budget -= chunk
                if budget <= 0:
                    break
            return Plan(items)
        if rep.num_running:
            return Plan(decode=True)
        return None
