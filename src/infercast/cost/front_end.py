"""An API server's serial front-end: the process that post-processes and streams every output token.

TensorRT-LLM 1.0's ``trtllm-serve`` detokenises and sends each streamed response in its main process (its
post-processing workers, which move that work out, are an opt-in experiment: TensorRT-LLM PR 5122, 2025-06).
Past the rate that process sustains, responses queue in it first-in-first-out, new requests queue behind
them, and every token reaches its client late by the queue's length. Modelled as a fluid queue of seconds of
work, fed at the end of each engine step (``CostProfile.stream_token_s`` per token); both simulators use it, and
``predict`` and ``sweep`` its static-batch case (:func:`static_batch_delays`). ITL stays the engine's step gaps;
TTFT, TPOT and E2E are what the clients see.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from infercast.cost.profile import CostProfile, load_profile
from infercast.errors import require_positive_number
from infercast.specs.deployment import Deployment


class FrontEnd:
    """Seconds of front-end work queued at ``t`` (after the last step fed in), drained at one second per second."""

    def __init__(self, token_s: float):
        self.token_s = token_s
        self.backlog = 0.0
        self.t = 0.0
        self.delay = 0.0
        """How late the tokens of the last step fed in reach their clients, on average (seconds)."""
        self.work = 0.0
        """Seconds of work fed in so far (its busy time: every second of work is drained)."""

    def backlog_at(self, t: float) -> float:
        """Work queued at ``t`` (what a request sent then waits for before the engine sees it); at or before the
        last step fed in, the backlog then."""
        return self.backlog if t <= self.t else max(0.0, self.backlog - (t - self.t))

    def emit(self, start: float, end: float, tokens: int, steps: int = 1, first: float | None = None) -> float:
        """``steps`` engine steps from ``start`` to ``end`` (the first ``first`` seconds long, default an equal
        share) emit ``tokens`` tokens each, at each step's end. Returns (and keeps as :attr:`delay`) how late the
        last step's tokens reach their clients on average.

        Per step the queue drains for the step's time, then takes the step's tokens: ``q = max(0, q - dt) + w``.
        Over steps that do not get shorter (a decode span's context only grows) that recursion has the closed
        form ``max(q1 + sum of (w - dt) over steps 2..k, w)`` (its suffix sums peak at an end), so a span of any
        length is one update, exact."""
        work = tokens * self.token_s
        self.work += steps * work
        dt0 = (end - start) / steps if first is None else first
        queued = max(0.0, self.backlog_at(start) - dt0) + work
        if steps > 1:
            queued = max(queued + (steps - 1) * work - (end - start - dt0), work)
        self.backlog, self.t = queued, max(end, self.t)
        # the step's tokens leave one after another: on average half their own work before the last one
        self.delay = queued - max(tokens - 1, 0) * self.token_s / 2
        return self.delay


def static_batch_delays(
    token_s: float, batch: np.ndarray | float, decode_s: np.ndarray | float, steps: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """How late a static batch's first and last tokens reach their clients, on average, behind a front-end idle
    before the batch: :meth:`FrontEnd.emit` of the ``batch`` first tokens at the prefill's end, then of ``steps``
    decode steps taking ``decode_s`` in all (equal steps: the mean for the first), vectorised over rows for
    ``sweep``. A front-end that keeps up adds about half a step's tokens' work; one that does not paces the
    stream at ``batch x token_s`` per step, which then sets TPOT."""
    batch, decode_s, steps = (np.asarray(x, dtype=float) for x in (batch, decode_s, steps))
    work = batch * token_s
    spread = np.maximum(batch - 1, 0) * token_s / 2  # the step's tokens leave one after another
    first = work - spread
    dt0 = decode_s / np.maximum(steps, 1)
    queued = np.maximum(work - dt0, 0.0) + work
    queued = np.where(steps > 1, np.maximum(queued + (steps - 1) * work - (decode_s - dt0), work), queued)
    last = np.where(steps > 0, queued - spread, first)
    return first, last


def with_front_end(profile: CostProfile | None, dep: Deployment, token_s: float | None) -> CostProfile | None:
    """``profile`` (None: the deployment's installed one) with its front-end's seconds per streamed token set to
    ``token_s`` (0: no front-end, as with post-processing workers or a server that keeps up); ``token_s`` None
    leaves ``profile`` as given."""
    if token_s is None:
        return profile
    token_s = require_positive_number("stream_token_s", token_s, allow_zero=True)
    hw = dep.hardware
    base = profile or load_profile(hw.id, hw.architecture, dep.engine.id)
    return replace(base, stream_token_s=token_s)
