"""In-flight batching of whole prompts with the running decodes (TensorRT-LLM without chunked prefill).

Every step gives each running sequence its decode token, then admits waiting prompts whole, in arrival order,
while they fit in what is left of the token budget (decodes count one token each): TensorRT-LLM's
MicroBatchScheduler with ``enable_chunked_prefill`` off, its default. A prompt that does not fit waits for a
later step (it is never split); a step with nothing else to run takes the first prompt whatever its length.
A prompt is admitted only when the KV blocks of its whole prompt + output are free beside what the running
requests reserved: TensorRT-LLM's default capacity policy ``GUARANTEED_NO_EVICT`` (CapacityScheduler), so a
started request is never preempted and a full cache queues new requests instead.
"""

from __future__ import annotations

from infercast.sim.scheduler.base import DECODE_ONLY, Plan, ReplicaView


class InflightScheduler:
    name = "inflight"
    continuous = True
    reserves = True

    def plan(self, rep: ReplicaView) -> Plan | None:
        waiting, running = rep.waiting, rep.num_running
        if not waiting:
            return DECODE_ONLY if running else None
        budget = rep.max_batched_tokens - running
        room = rep.max_seqs - rep.num_seqs
        items: list[tuple[int, int]] = []
        while waiting and room > 0:
            i = waiting[0]
            chunk = rep.admit(i, None, limit=budget if items or running else None, reserve=True)
            if chunk is None:
                break
            items.append((i, chunk))
            budget -= chunk
            room -= 1
        if items or running:
            return Plan(items, decode=running > 0)
        return None
