"""Per-request state of a simulation, one flat typed array per field, indexed by request id.

While a simulation runs the fields are :class:`array.array` objects (element access is several times cheaper
than on NumPy arrays, and the storage is just as compact); :meth:`RequestTable.freeze` turns them into NumPy
arrays for the metrics afterwards.
"""

from __future__ import annotations

from array import array

import numpy as np

from infercast.sim.workload import Workload

_FLOAT_FIELDS = ("arrival", "visible", "first_token", "last_token", "finish", "scheduled")
_INT_FIELDS = ("prompt", "output", "target", "computed", "generated", "shared", "pinned", "private", "cached_tokens",
               "preemptions", "swapped", "replica", "prefill_replica")  # fmt: skip


def _floats(values: np.ndarray) -> array:
    out = array("d")
    out.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return out


def _ints(values: np.ndarray) -> array:
    out = array("q")
    out.frombytes(np.ascontiguousarray(values, dtype=np.int64).tobytes())
    return out


class RequestTable:
    """Lengths, progress and timestamps of every request; shared by all replicas of a run."""

    def __init__(self, workload: Workload):
        n = len(workload)
        self.n = n
        self.hashes = workload.block_hashes
        self.hashes_block_size = workload.hash_block_size
        nan = np.full(n, np.nan)
        zeros = np.zeros(n, np.int64)
        self.arrival = _floats(workload.arrival)
        self.visible = _floats(workload.arrival)  # when the request reaches its engine (after the request overhead)
        self.first_token = _floats(nan)
        self.last_token = _floats(nan)
        self.finish = _floats(nan)
        self.scheduled = _floats(nan)  # first time any of its tokens ran (queueing delay ends)
        self.prompt = _ints(workload.prompt_len)
        self.output = _ints(workload.output_len)
        self.target = _ints(workload.prompt_len)  # tokens the next (re)prefill must hold: prompt (+ outputs on resume)
        self.computed = _ints(zeros)  # tokens of the current prefill whose KV exists
        self.generated = _ints(zeros)
        self.shared = _ints(zeros)  # engine blocks of its prompt served by the prefix cache
        self.pinned = _ints(zeros)  # prefix-cache units it holds a reference to (see kv_cache)
        self.private = _ints(zeros)  # engine blocks it owns
        self.cached_tokens = _ints(zeros)  # prompt tokens served by the prefix cache (first admission)
        self.preemptions = _ints(zeros)
        self.swapped = _ints(zeros)
        self.replica = _ints(np.full(n, -1))
        self.prefill_replica = _ints(np.full(n, -1))
        self.frozen = False

    def freeze(self) -> None:
        """Turn every field into a NumPy array (after the run)."""
        if self.frozen:
            return
        for name in _FLOAT_FIELDS:
            setattr(self, name, np.frombuffer(getattr(self, name), dtype=np.float64).copy())
        for name in _INT_FIELDS:
            setattr(self, name, np.frombuffer(getattr(self, name), dtype=np.int64).copy())
        self.swapped = self.swapped.astype(bool)
        self.frozen = True

    def queue_delay(self) -> np.ndarray:
        """Per request, seconds in the engine's waiting queue: from reaching the engine (``visible``: arrival,
        or the client's send, plus the engine's per-request overhead — API server, tokenisation) to the first
        step that runs any of its tokens (``scheduled``). NaN for requests never scheduled. This is the one
        definition of queueing used everywhere (summary, saturation, per-request table, trace): the
        waiting-queue time of vLLM's ``vllm:request_queue_time_seconds``; the overhead before it is part of
        TTFT but not of the queue. Call after :meth:`freeze`."""
        return np.asarray(self.scheduled) - np.asarray(self.visible)

    def hashes_of(self, i: int) -> np.ndarray | None:
        return None if self.hashes is None else self.hashes[i]
