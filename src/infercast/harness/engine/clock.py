"""Where the engine's timestamps come from: the wall clock, or the simulator's step-cost model.

One engine, two clocks: :class:`WallClock` times real steps (the engine as a server), :class:`ModelClock`
advances by the cost model's time for each step's features (the engine making exactly the decisions the
simulator makes, for the tests that check both executors agree).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Protocol


class Clock(Protocol):
    """Time as the engine loop sees it (seconds from the start of a run)."""

    request_overhead_s: float

    def now(self) -> float: ...

    def idle_until(self, t: float) -> None:
        """Nothing to run before ``t``: wait (or jump) until then."""
        ...

    def finish_step(self, start: float, features: Mapping[str, float]) -> float:
        """A step that began at ``start`` has run; returns when it ended."""
        ...


class WallClock:
    """``time.perf_counter`` from construction; idle waits sleep."""

    request_overhead_s = 0.0

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def idle_until(self, t: float) -> None:
        delay = t - self.now()
        if delay > 0:
            time.sleep(delay)

    def finish_step(self, start: float, features: Mapping[str, float]) -> float:
        return self.now()


class ModelClock:
    """Simulated time: each step lasts ``step_time(**features)`` (the simulator's compiled cost function)."""

    def __init__(self, step_time: Callable[..., float], request_overhead_s: float = 0.0):
        self.step_time = step_time
        self.request_overhead_s = request_overhead_s
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def idle_until(self, t: float) -> None:
        self.t = max(self.t, t)

    def finish_step(self, start: float, features: Mapping[str, float]) -> float:
        self.t = start + self.step_time(**features)
        return self.t
