"""Progress guarantee for the simulator's event loops: a loop that turns without progress is stopped.

Every loop iteration either advances a clock, routes an event or changes a queue. The watchdog counts
consecutive iterations whose progress marker (a tuple of clocks and counters) did not change; past
:data:`STALL_LIMIT` it raises :class:`SimulationStalled` with what was stuck, instead of spinning forever.
Requests that can never fit are refused before the run (:mod:`infercast.sim.fit_check`), so a stall is a
simulator bug: the CLI reports it in one line as an internal error (exit status 1).
"""

from __future__ import annotations

from collections.abc import Hashable

STALL_LIMIT = 200_000
"""Iterations without progress tolerated: far above any legitimate burst of same-instant work (admitting or
routing a few thousand requests at one timestamp takes a few thousand iterations, each one progress)."""


class SimulationStalled(RuntimeError):
    """The simulator's event loop stopped making progress (a bug; see module docstring)."""


class Watchdog:
    """``tick(marker)`` once per loop iteration; raises after :data:`STALL_LIMIT` equal markers in a row."""

    __slots__ = ("last", "limit", "stalled", "where")

    def __init__(self, where: str, limit: int = STALL_LIMIT):
        self.where = where
        self.limit = limit
        self.last: Hashable = None
        self.stalled = 0

    def tick(self, marker: Hashable, describe=None) -> None:
        if marker != self.last:
            self.last, self.stalled = marker, 0
            return
        self.stalled += 1
        if self.stalled >= self.limit:
            state = f"; {describe()}" if describe is not None else ""
            raise SimulationStalled(
                f"{self.where} made no progress in {self.limit:,} iterations (state {marker}){state}"
            )
