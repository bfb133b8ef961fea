"""What a scheduler sees of an engine replica (:class:`ReplicaView`), the interface every scheduler implements
(:class:`Scheduler`), and the plan it returns for one engine step.

The simulator's :class:`~infercast.sim.replica.Replica` implements :class:`ReplicaView`; so may a real engine,
which can then run the scheduler classes of this package unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(slots=True)
class Plan:
    """One step: prefill chunks ``(request id, tokens)`` and whether the running decodes take part."""

    prefill: list[tuple[int, int]] = field(default_factory=list)
    decode: bool = False


class ReplicaView(Protocol):
    """Everything a scheduler reads and calls on the replica it schedules — nothing else.

    Requests are integer ids. A request is *waiting* (queued, no KV yet), *prefilling* (admitted: its prompt
    is being computed, possibly in chunks) or *running* (decoding one token per step).
    """

    @property
    def waiting(self) -> Sequence[int]:
        """Queued requests, in the order they must be admitted (``waiting[0]`` first)."""
        ...

    @property
    def prefilling(self) -> Sequence[int]:
        """Admitted requests whose prompt is not fully computed, in admission order."""
        ...

    @property
    def num_running(self) -> int:
        """Sequences in the decode phase."""
        ...

    @property
    def num_seqs(self) -> int:
        """Sequences holding KV: running + prefilling."""
        ...

    @property
    def max_seqs(self) -> int:
        """Most sequences in the engine at once (``max_num_seqs``)."""
        ...

    @property
    def max_batched_tokens(self) -> int:
        """Token budget of one step (``max_num_batched_tokens``): prefill tokens + one per decode."""
        ...

    def admit(self, i: int, budget: int | None, *, limit: int | None = None, reserve: bool = False) -> int | None:
        """Move ``i`` (which must be ``waiting[0]``) into prefill and allocate KV blocks for its first chunk, at
        most ``budget`` tokens (None: the whole remaining prompt; ``reserve``: blocks for prompt + output).
        Returns the chunk's tokens, or None — changing nothing — when blocks run short or the prompt left
        (after prefix-cache hits) exceeds ``limit``."""
        ...

    def grow(self, i: int, budget: int | None) -> int:
        """Allocate the next chunk (at most ``budget`` tokens) of prefilling request ``i``; returns its tokens,
        0 when blocks run short."""
        ...


class Scheduler(Protocol):
    """Chooses the next step's work; admits requests through ``ReplicaView.admit`` / ``ReplicaView.grow``."""

    name: str
    continuous: bool
    """False for static batching: arrivals and completions do not change a running batch."""
    reserves: bool
    """Admitted requests hold KV blocks for their whole prompt + output from admission (``admit(reserve=True)``):
    nothing grows while decoding and nothing is ever preempted (static batching; TensorRT-LLM's default
    ``GUARANTEED_NO_EVICT`` capacity policy)."""

    def plan(self, rep: ReplicaView) -> Plan | None:
        """The next step, or None when there is nothing to run now."""
        ...


DECODE_ONLY = Plan(decode=True)
"""Shared plan of a decode-only step (never mutated)."""
