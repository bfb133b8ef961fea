"""Per-request state of a simulation, one flat typed array per field, indexed by request id.

While a simulation runs the fields are :class:`array.array` objects (element access is several times cheaper
than on NumPy arrays, and the storage is just as compact); :meth:`RequestTable.freeze` turns them into NumPy
arrays for the metrics afterwards.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np

from infercast.sim.workload import Workload

_FLOAT_FIELDS = ("arrival", "visible", "first_token", "last_token", "finish", "scheduled", "intake")
_INT_FIELDS = (
    "prompt",
    "output",
    "target",
    "computed",
    "generated",
    "shared",
    "pinned",
    "private",
    "cached_tokens",
    "preemptions",
    "swapped",
    "replica",
    "prefill_replica",
)


Column: TypeAlias = Any
"""A field: an :class:`array.array` while the run goes (cheap element access), a NumPy array after
:meth:`RequestTable.freeze`; the type changes in place, so neither static type fits every use."""


def _floats(values: np.ndarray) -> Column:
    out = array("d")
    out.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return out


def _ints(values: np.ndarray) -> Column:
    out = array("q")
    out.frombytes(np.ascontiguousarray(values, dtype=np.int64).tobytes())
    return out


INTAKE_STREAM = 0x1A7E
"""Seed stream of the per-request intake draws (apart from the workload's own streams, so adding them changed no
sampled length or arrival)."""


def intake_draws(n: int, seed: int | None) -> np.ndarray:
    """One standard exponential draw per request: its share of the engine's varying per-request latency
    (``CostProfile.request_jitter_s`` scales it). Both simulators take the same draws from the run's seed."""
    return np.random.default_rng([INTAKE_STREAM, seed or 0]).standard_exponential(n)


def enter_in_visible_order(pending: deque[int], i: int, visible: Sequence[float]) -> None:
    """Add request ``i`` to a replica's intake queue, which stays in the order requests reach the engine: one
    whose varying overhead ended before earlier-sent ones' overtakes them (ties keep the sending order)."""
    k = len(pending)
    while k and visible[pending[k - 1]] > visible[i]:
        k -= 1
    if k == len(pending):
        pending.append(i)
    else:
        pending.insert(k, i)


class RequestTable:
    """Lengths, progress and timestamps of every request; shared by all replicas of a run."""

    def __init__(self, workload: Workload, seed: int | None = None):
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
        self.intake = _floats(intake_draws(n, seed))  # x request_jitter_s: its varying request overhead
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
