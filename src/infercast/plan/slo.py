"""Service-level objectives as percentiles (``ttft:p99:200ms``) and the test a simulated run must pass.

A term with a percentile bounds that percentile of one metric over the completed requests (p99 TTFT <= 200 ms).
A term without one (``ttft:200ms``) is a goodput limit, as in ``vllm bench serve --goodput``: the share of
requests meeting every such limit at once must reach the attainment target (default 0.99). A run passes
when it keeps up with its load (not ``saturated``, :mod:`infercast.sim.saturation`) and every term holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from infercast.errors import InfercastError, parse_duration, require_fraction
from infercast.sim.metrics import request_metrics

METRICS = {"ttft": "ttft", "tpot": "tpot", "e2e": "e2e", "e2el": "e2e"}
"""Names a term may use (``e2el`` as vLLM spells it) -> the metric."""
UNFINISHED_S = 1e18
"""Latency given to requests that never finished (finite, so percentiles interpolate without inf - inf)."""
DEFAULT_ATTAINMENT = 0.99
"""Share of requests that must meet the goodput limits (terms without a percentile) when none is given."""


@dataclass(frozen=True)
class SLOTerm:
    """One objective: ``percentile`` (None: a goodput limit) of ``metric`` at most ``limit_s`` seconds."""

    metric: str
    limit_s: float
    percentile: float | None = None

    @property
    def label(self) -> str:
        """``ttft p99`` or ``ttft`` (goodput limit)."""
        return self.metric if self.percentile is None else f"{self.metric} p{self.percentile:g}"

    def describe(self) -> str:
        return f"{self.label} <= {self.limit_s * 1e3:g} ms"


@dataclass(frozen=True)
class SLOCheck:
    """The verdict on one run: pass, the measured value of every term, and the term closest to failing."""

    passes: bool
    measured_s: dict[str, float]
    attainment: float
    saturated: bool
    binding: str
    """The term with the least headroom (measured / limit highest); 'saturated' when the run cannot keep up."""
    headroom: float
    """Largest measured / limit over the terms (<= 1 passes)."""


@dataclass(frozen=True)
class SLOSet:
    """The terms of a plan and the attainment target of its goodput limits."""

    terms: tuple[SLOTerm, ...]
    attainment: float = DEFAULT_ATTAINMENT

    def __post_init__(self) -> None:
        if not self.terms:
            raise InfercastError("needs at least one objective, e.g. ttft:p99:200ms tpot:p90:50ms", field="slo")
        object.__setattr__(self, "attainment", require_fraction("attainment", self.attainment))
        if self.attainment <= 0:
            raise InfercastError(f"must be in (0, 1], got {self.attainment}", field="attainment")

    @classmethod
    def parse(cls, specs: str | Sequence[str], attainment: float | None = None) -> SLOSet:
        """``"ttft:p99:200ms tpot:p90:50ms e2e:p99:20s"`` (or a list of such terms) -> an :class:`SLOSet`.

        Times take ms, s or us (a bare number is ms); percentiles are ``p`` and a number in (0, 100].
        """
        if isinstance(specs, str):
            specs = specs.replace(",", " ").split()
        if not isinstance(specs, list | tuple):
            raise InfercastError(f"expected terms like 'ttft:p99:200ms', got {specs!r}", field="slo")
        terms: list[SLOTerm] = []
        for spec in specs:
            terms.append(_parse_term(spec))
        seen = [t.label for t in terms]
        dup = next((label for label in seen if seen.count(label) > 1), None)
        if dup is not None:
            raise InfercastError(f"objective {dup!r} given twice", field="slo")
        return cls(tuple(terms), DEFAULT_ATTAINMENT if attainment is None else attainment)

    @property
    def goodput_terms(self) -> tuple[SLOTerm, ...]:
        return tuple(t for t in self.terms if t.percentile is None)

    def limit(self, metric: str) -> float | None:
        """The tightest limit on ``metric`` over every term (None when unconstrained)."""
        limits = [t.limit_s for t in self.terms if t.metric == metric]
        return min(limits) if limits else None

    def check(
        self, arrival: np.ndarray, first: np.ndarray, finish: np.ndarray, output: np.ndarray, saturated: bool
    ) -> SLOCheck:
        """Judge one run from its per-request times (seconds; unfinished requests are NaN and fail)."""
        ttft, tpot, e2e = request_metrics(arrival, first, finish, output)
        values = {"ttft": ttft, "tpot": tpot, "e2e": e2e}
        done = ~np.isnan(finish)
        measured: dict[str, float] = {}
        ratios: dict[str, float] = {}
        for term in self.terms:
            if term.percentile is None:
                continue
            v = values[term.metric]
            # an unfinished request counts as later than any limit; single-token outputs have no TPOT
            v = np.where(done, v, UNFINISHED_S)
            v = v[~np.isnan(v)]
            q = float(np.percentile(v, term.percentile, method="linear")) if v.size else 0.0
            measured[term.label] = q
            ratios[term.label] = q / term.limit_s
        ok = done.copy()
        for term in self.goodput_terms:
            v = values[term.metric]
            ok &= ~(v > term.limit_s)  # NaN (no TPOT for one-token outputs) passes
        attained = float(ok.mean()) if ok.size else 0.0
        if self.goodput_terms:
            # the share met, against the share needed: > 1 when fewer requests meet the limits than required
            ratios["goodput"] = (1.0 - attained) / max(1.0 - self.attainment, 1e-9) if attained < 1 else 0.0
        binding = max(ratios, key=ratios.__getitem__)
        worst = ratios[binding]
        passes = not saturated and worst <= 1.0
        if saturated:
            binding = "saturated"
        return SLOCheck(passes, measured, attained, saturated, binding, worst)

    def to_dict(self) -> dict[str, Any]:
        return {
            "terms": [
                {"metric": t.metric, "percentile": t.percentile, "limit_ms": t.limit_s * 1e3} for t in self.terms
            ],
            "attainment": self.attainment,
        }

    def describe(self) -> str:
        text = ", ".join(t.describe() for t in self.terms)
        if self.goodput_terms:
            text += f" for {self.attainment:.0%} of requests"
        return text


def _parse_term(spec: object) -> SLOTerm:
    if not isinstance(spec, str):
        raise InfercastError(f"expected a term like 'ttft:p99:200ms', got {spec!r}", field="slo")
    parts = [p.strip() for p in spec.strip().split(":")]
    if len(parts) not in (2, 3):
        raise InfercastError(
            f"expected METRIC:pNN:TIME or METRIC:TIME (e.g. ttft:p99:200ms), got {spec!r}", field="slo"
        )
    metric = METRICS.get(parts[0].lower())
    if metric is None:
        raise InfercastError(
            f"unknown metric {parts[0]!r} in {spec!r}; allowed: ttft, tpot, e2e",
            field="slo",
            allowed=("ttft", "tpot", "e2e"),
        )
    percentile = None
    if len(parts) == 3:
        text = parts[1].lower()
        try:
            percentile = float(text[1:]) if text.startswith("p") else float("nan")
        except ValueError:
            percentile = float("nan")
        if not (0 < percentile <= 100):
            raise InfercastError(
                f"percentile must look like p50, p90, p99.9 (in (0, 100]), got {parts[1]!r}", field="slo"
            )
    limit = parse_duration("slo", parts[-1])
    return SLOTerm(metric, limit, percentile)
