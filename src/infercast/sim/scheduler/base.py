"""The interface every scheduler implements, and the plan it returns for one engine step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from infercast.sim.replica import Replica


@dataclass(slots=True)
class Plan:
    """One step: prefill chunks ``(request id, tokens)`` and whether the running decodes take part."""

    prefill: list[tuple[int, int]] = field(default_factory=list)
    decode: bool = False


class Scheduler(Protocol):
    """Chooses the next step's work; admits requests through ``Replica.admit`` / ``Replica.grow``."""

    name: str
    continuous: bool
    """False for static batching: arrivals and completions do not change a running batch."""

    def plan(self, rep: Replica) -> Plan | None:
        """The next step, or None when there is nothing to run now."""
        ...


DECODE_ONLY = Plan(decode=True)
"""Shared plan of a decode-only step (never mutated)."""
