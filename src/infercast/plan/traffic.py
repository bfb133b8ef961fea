"""The traffic a plan must serve: request lengths (or a trace), the target rate, and the probe size.

Every probe of every candidate replays the same requests (:meth:`Traffic.requests`, the same seed) with
arrivals retimed to the probed rate, so candidates are compared on identical work and a probe's verdict
can be reproduced with one ``simulate`` call (:meth:`Traffic.at_rate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from infercast.errors import InfercastError, require_positive_int, require_positive_number
from infercast.sim.workload import LengthLike, Workload, WorkloadSpec, retime

DEFAULT_PROBE_REQUESTS = 400
"""Requests per probe: the saturation test judges the served/arrived ratio over >= 150 arrivals after a 25 %
warm-up (:mod:`infercast.sim.saturation`), so a probe needs at least ~200; 400 keeps p99 to the 4th-worst."""


@dataclass(frozen=True)
class Traffic:
    """Lengths (``input_len``/``output_len``: numbers or distributions) or a ``trace``; ``rate`` the target
    in requests/s (None: only the capacity per unit is searched)."""

    input_len: LengthLike | None = None
    output_len: LengthLike | None = None
    trace: str | Path | None = None
    rate: float | None = None
    num_requests: int = DEFAULT_PROBE_REQUESTS
    arrival: str | None = None
    burstiness: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_requests", require_positive_int("num_requests", self.num_requests))
        if self.rate is not None:
            object.__setattr__(self, "rate", require_positive_number("rate", self.rate))
        object.__setattr__(self, "burstiness", require_positive_number("burstiness", self.burstiness, allow_inf=True))
        object.__setattr__(self, "seed", require_positive_int("seed", self.seed, minimum=0))
        self.requests  # noqa: B018 - validates the source and options now, with field-named errors

    @cached_property
    def requests(self) -> Workload:
        """The requests of every probe, all at t = 0 (retimed per probe)."""
        spec = WorkloadSpec(
            input_len=self.input_len,
            output_len=self.output_len,
            trace=self.trace,
            num_requests=self.num_requests,
            rate=math.inf,
            arrival=self.arrival,
            burstiness=self.burstiness,
            seed=self.seed,
        )
        return spec.build()

    def at_rate(self, rate: float, copies: int = 1) -> Workload:
        """The probe requests (``copies`` times over, for a fleet) arriving at ``rate`` requests/s."""
        work = self.requests if copies == 1 else self.requests.tile(copies)
        return retime(work, rate=rate, arrival=self.arrival, burstiness=self.burstiness, seed=self.seed)

    def offline(self) -> Workload:
        """The probe requests all at t = 0 (the capacity run)."""
        return retime(self.requests, offline=True, seed=self.seed)

    @cached_property
    def mean_input(self) -> float:
        return float(np.mean(self.requests.prompt_len))

    @cached_property
    def mean_output(self) -> float:
        return float(np.mean(self.requests.output_len))

    @cached_property
    def median_lengths(self) -> tuple[int, int]:
        """Median prompt and output tokens: the analytic latency floors are taken there."""
        w = self.requests
        return max(int(np.median(w.prompt_len)), 1), max(int(np.median(w.output_len)), 1)

    @cached_property
    def longest(self) -> int:
        """Longest prompt + output: every unit must hold one such request."""
        w = self.requests
        return int((w.prompt_len + w.output_len).max())

    def describe(self) -> str:
        src = f"trace {self.trace}" if self.trace is not None else f"prompt {self.input_len}, output {self.output_len}"
        load = f" at {self.rate:g} req/s" if self.rate is not None else ""
        return f"{src}{load}"

    def check_rate(self) -> float:
        if self.rate is None:
            raise InfercastError("a target rate is needed for this (`rate`)", field="rate")
        return self.rate
