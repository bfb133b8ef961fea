"""What a ``simulate`` call says about its requests, validated in one place and built into a :class:`Workload`."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from infercast.errors import (
    InfercastError,
    require_positive_int,
    require_positive_number,
    unknown_choice,
)
from infercast.files import is_file
from infercast.limits import BYTES_PER_REQUEST, require_count
from infercast.sim.workload.arrivals import ARRIVAL_KINDS
from infercast.sim.workload.core import Workload
from infercast.sim.workload.lengths import LengthLike
from infercast.sim.workload.synthetic import PrefixSpec, _apply_prefix, _streams, retime, synthetic
from infercast.sim.workload.traces import BUILTIN_TRACES, TRACE_SUFFIXES, builtin_key, builtin_trace, load_trace

DEFAULT_NUM_REQUESTS = 1000
"""Synthetic open-loop / offline workloads without ``num_requests``: ``vllm bench serve --num-prompts`` (1000)."""
PROMPTS_PER_CLIENT = 10
"""Synthetic closed-loop workloads without ``num_requests`` send 10 x ``concurrency`` requests, as published
closed-loop sweeps run ``vllm bench serve --max-concurrency C --num-prompts 10*C`` (aiconfigurator's
silicon samples, InferenceMAX): fewer requests over-weight the first burst of C simultaneous prefills."""


@dataclass(frozen=True)
class WorkloadSpec:
    """The requests of a simulation: one source, at most one load, and options applied to them.

    * Source, exactly one: ``workload`` (a :class:`Workload`), ``trace`` (a CSV / Mooncake JSONL file, or a
      built-in name: ``azure_conv``, ``azure_code``), or ``input_len`` and ``output_len`` (lengths or
      distributions, :class:`~infercast.sim.workload.LengthSpec`).
    * ``num_requests``: synthetic, how many (default 10 x ``concurrency`` for a closed loop, else 1000); trace or
      workload, the first N (not more than it has).
    * Load, at most one: ``rate`` (open loop; ``arrival`` kind and ``burstiness`` as in ``vllm bench serve``),
      ``concurrency`` (closed loop of N clients) or ``offline`` (everything at t=0). Synthetic workloads need
      one; for a trace or a workload it replaces the recorded arrivals (lengths and block hashes are kept).
    * ``prefix``: shared system prompts in front of the prompts, any source (see :func:`synthetic`).
    * ``seed``: the random streams of lengths, arrivals and prefixes.

    Every option given takes effect: one that would be ignored, or that conflicts with another, is an
    :class:`~infercast.errors.InfercastError` naming it.
    """

    workload: Workload | None = None
    trace: str | Path | None = None
    input_len: LengthLike | None = None
    output_len: LengthLike | None = None
    num_requests: int | None = None
    rate: float | None = None
    burstiness: float = 1.0
    concurrency: int | None = None
    offline: bool = False
    arrival: str | None = None
    seed: int = 0
    prefix: PrefixSpec | None = None

    def __post_init__(self) -> None:
        lengths_given = self.input_len is not None or self.output_len is not None
        sources = {"`trace`": self.trace is not None, "lengths": lengths_given, "`workload`": self.workload is not None}
        if sum(sources.values()) != 1:
            given = [name for name, on in sources.items() if on]
            raise InfercastError(
                "needs one source of requests: a `trace` (a file, or azure_conv / azure_code), `input_len` and "
                "`output_len`, or a `workload`; " + (f"got {' and '.join(given)}" if given else "got none"),
                field="workload",
            )
        if lengths_given and (self.input_len is None or self.output_len is None):
            field = "output_len" if self.output_len is None else "input_len"
            raise InfercastError("both `input_len` and `output_len` are needed", field=field)
        if self.workload is not None and not isinstance(self.workload, Workload):
            raise InfercastError(f"must be a Workload, got {type(self.workload).__name__}", field="workload")
        if self.trace is not None and not isinstance(self.trace, str | Path):
            raise InfercastError(f"must be a file path or a built-in trace name, got {self.trace!r}", field="trace")
        if self.num_requests is not None:
            self._set("num_requests", require_count("num_requests", self.num_requests, BYTES_PER_REQUEST))
        if not isinstance(self.offline, bool):
            raise InfercastError(f"must be True or False, got {self.offline!r}", field="offline")
        if self.rate is not None:
            self._set("rate", require_positive_number("rate", self.rate, allow_inf=True))
        if self.concurrency is not None:
            self._set("concurrency", require_positive_int("concurrency", self.concurrency))
        loads = sum((self.rate is not None, self.concurrency is not None, self.offline))
        if loads > 1 or (loads == 0 and lengths_given):
            raise InfercastError("choose exactly one of `rate`, `concurrency`, `offline`", field="rate")
        self._set("burstiness", require_positive_number("burstiness", self.burstiness, allow_inf=True))
        if self.burstiness != 1.0 and self.rate is None:
            raise InfercastError("shapes open-loop arrivals: it needs `rate`", field="burstiness")
        if self.arrival is not None:
            kinds = [k for k in ARRIVAL_KINDS if k != "offline"]
            if isinstance(self.arrival, str) and self.arrival.lower() == "offline":
                raise InfercastError("'offline' is not an arrival process of `rate`: use `offline`", field="arrival")
            if not isinstance(self.arrival, str) or self.arrival.lower() not in kinds:
                raise unknown_choice("arrival", str(self.arrival), kinds)
            if self.rate is None:
                raise InfercastError("is the arrival process of `rate`: it needs `rate`", field="arrival")
            self._set("arrival", self.arrival.lower())
        self._set("seed", require_positive_int("seed", self.seed, minimum=0))

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> WorkloadSpec:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    @property
    def has_load(self) -> bool:
        return self.rate is not None or self.concurrency is not None or self.offline

    @property
    def default_num_requests(self) -> int:
        """Synthetic requests sent when ``num_requests`` is not given (see :data:`PROMPTS_PER_CLIENT`)."""
        return PROMPTS_PER_CLIENT * self.concurrency if self.concurrency is not None else DEFAULT_NUM_REQUESTS

    def build(self) -> Workload:
        """The workload: the source, cut to ``num_requests``, retimed to the load, with the prefixes added."""
        if self.input_len is not None and self.output_len is not None:  # __post_init__: both or neither
            if self.offline:
                kind = "offline"
            elif self.rate is not None:
                kind = self.arrival or ("gamma" if self.burstiness != 1.0 else "poisson")
            else:
                kind = "poisson"  # closed loop: no arrival process
            n = self.num_requests if self.num_requests is not None else self.default_num_requests
            return synthetic(
                n,
                self.input_len,
                self.output_len,
                arrival=kind,
                rate=self.rate,
                burstiness=self.burstiness,
                concurrency=self.concurrency,
                seed=self.seed,
                prefix=self.prefix,
            )
        if self.workload is not None:
            work = self.workload
        elif self.trace is not None:
            work = _load_trace(self.trace)
        else:  # __post_init__ requires one source
            raise InfercastError("give a `workload`, a `trace`, or `input_len` and `output_len`", field="workload")
        if self.num_requests is not None:
            if self.num_requests > len(work):
                source = "the trace" if self.trace is not None else "the workload"
                raise InfercastError(
                    f"{source} has only {len(work):,} requests, {self.num_requests:,} asked for "
                    "(Workload.tile(copies) repeats it)",
                    field="num_requests",
                )
            work = work.head(self.num_requests)
        if self.has_load:
            work = retime(
                work,
                rate=self.rate,
                arrival=self.arrival,
                burstiness=self.burstiness,
                concurrency=self.concurrency,
                offline=self.offline,
                seed=self.seed,
            )
        if self.prefix is not None:
            work = _apply_prefix(work, self.prefix, _streams(self.seed)[3])
        return work


WORKLOAD_FIELDS = tuple(f.name for f in fields(WorkloadSpec))
"""The keywords of :class:`WorkloadSpec` (``simulate`` and ``rate_sweep`` take them too)."""


def _load_trace(trace: str | Path) -> Workload:
    """A trace file, or a built-in trace by name; errors name the ``trace`` option."""
    text = str(trace)
    path = Path(text).expanduser()
    try:
        if is_file(path):
            return load_trace(path)
        key = builtin_key(text)
        if key is not None:
            return builtin_trace(key)
        if path.suffix.lower() in TRACE_SUFFIXES or "/" in text or "\\" in text:
            return load_trace(path)  # reports the missing file
    except InfercastError as exc:
        if exc.field != "path":
            raise
        raise InfercastError(str(exc).removeprefix("path: "), field="trace") from None
    err = unknown_choice("trace", text, BUILTIN_TRACES)
    raise InfercastError(
        f"{str(err).removeprefix('trace: ')}; or give a trace file ({', '.join(TRACE_SUFFIXES)})",
        field="trace",
        allowed=err.allowed,
    )
