"""Per-request state of a simulation, as NumPy arrays indexed by request id (no per-request objects)."""

from __future__ import annotations

import numpy as np

from infercast.sim.workload import Workload


class RequestTable:
    """Lengths, progress and timestamps of every request; shared by all replicas of a run."""

    def __init__(self, workload: Workload):
        n = len(workload)
        self.n = n
        self.arrival = workload.arrival.astype(np.float64).copy()
        self.prompt = workload.prompt_len.astype(np.int64)
        self.output = workload.output_len.astype(np.int64)
        self.hashes = workload.block_hashes
        self.hashes_block_size = workload.hash_block_size
        self.visible = self.arrival.copy()  # when the request reaches its current replica
        self.target = self.prompt.copy()  # tokens the next (re)prefill must hold: prompt (+ outputs on resume)
        self.computed = np.zeros(n, np.int64)  # tokens of the current prefill whose KV exists
        self.generated = np.zeros(n, np.int64)
        self.first_token = np.full(n, np.nan)
        self.last_token = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.scheduled = np.full(n, np.nan)  # first time any of its tokens ran (queueing delay ends)
        self.shared = np.zeros(n, np.int64)  # engine blocks of its prompt served by the prefix cache
        self.pinned = np.zeros(n, np.int64)  # hash blocks it holds a reference to
        self.private = np.zeros(n, np.int64)  # engine blocks it owns
        self.cached_tokens = np.zeros(n, np.int64)  # prompt tokens served by the prefix cache (first admission)
        self.preemptions = np.zeros(n, np.int64)
        self.swapped = np.zeros(n, bool)
        self.replica = np.full(n, -1, np.int64)
        self.prefill_replica = np.full(n, -1, np.int64)

    def hashes_of(self, i: int) -> np.ndarray | None:
        return None if self.hashes is None else self.hashes[i]
