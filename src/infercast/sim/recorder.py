"""What a simulation records as it runs: token gaps, a bounded step trace, occupancy over time."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from infercast.sim.metrics import GapRecorder


@dataclass
class StepRecord:
    """One engine step (or a run of identical-shape decode steps) for the Perfetto trace."""

    replica: int
    start: float
    duration: float
    kind: str  # prefill | decode | mixed
    prefill_tokens: int
    decode_seqs: int
    steps: int = 1
    prefill_ids: tuple[int, ...] = ()


@dataclass
class Recorder:
    """Collects metrics while replicas run; bounded memory whatever the run length."""

    trace_limit: int = 0
    """Keep at most this many step records for the timeline trace (0: none)."""
    sample_interval: float = 1.0
    """Occupancy is sampled at most once per this many simulated seconds per replica."""
    gaps: GapRecorder = field(default_factory=GapRecorder)
    steps: list[StepRecord] = field(default_factory=list)
    samples: list[tuple[int, float, int, int, int, int]] = field(default_factory=list)
    step_count: int = 0
    busy_time: float = 0.0
    decode_seqs: int = 0
    """Σ over steps of the sequences decoding in it (for the mean decode batch)."""
    prefill_only_steps: int = 0
    """Steps in which no sequence decodes (prefill-first and static batching's prefill steps)."""
    _next_sample: dict[int, float] = field(default_factory=dict)
    tracing: bool = field(init=False)
    """Whether step records are still being kept (a plain attribute: hot loops read it every step)."""

    def __post_init__(self) -> None:
        self.tracing = self.trace_limit > 0

    def flush_check(self) -> None:
        """Called every few thousand steps: keeps the gap buffers bounded whatever the sampling interval."""
        self.gaps.maybe_flush()

    def step(self, record: StepRecord) -> None:
        self.step_count += record.steps
        self.busy_time += record.duration
        self.decode_seqs += record.decode_seqs * record.steps
        if not record.decode_seqs:
            self.prefill_only_steps += record.steps
        if len(self.steps) < self.trace_limit:
            self.steps.append(record)
        self.tracing = len(self.steps) < self.trace_limit

    def count(self, steps: int, duration: float, decode_seqs: int) -> None:
        """Count steps without keeping a trace record (the hot path when no trace is wanted)."""
        self.step_count += steps
        self.busy_time += duration
        self.decode_seqs += decode_seqs * steps
        if not decode_seqs:
            self.prefill_only_steps += steps

    def mean_decode_batch(self) -> float:
        """Mean number of sequences decoding per step, over the steps in which any does (0 without any)."""
        steps = self.step_count - self.prefill_only_steps
        return self.decode_seqs / steps if steps else 0.0

    def sample(self, replica: int, t: float, used_blocks: int, running: int, waiting: int, prefilling: int) -> float:
        """(replica, time, KV blocks in use, running, waiting, prefilling), rate-limited per replica; returns
        when this replica should sample next (callers may skip calling until then)."""
        due = self._next_sample.get(replica, 0.0)
        if t >= due:
            self.gaps.maybe_flush()
            self.samples.append((replica, t, used_blocks, running, waiting, prefilling))
            due = self._next_sample[replica] = t + self.sample_interval
        return due

    def occupancy(self) -> np.ndarray:
        """Samples as a structured array."""
        dtype = [
            ("replica", "i8"),
            ("t", "f8"),
            ("kv_blocks", "i8"),
            ("running", "i8"),
            ("waiting", "i8"),
            ("prefilling", "i8"),
        ]
        return np.array(self.samples, dtype=dtype)
