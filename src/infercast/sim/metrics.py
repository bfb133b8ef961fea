"""Serving metrics with the definitions of ``vllm bench serve``.

- TTFT: request sent -> first token.  TPOT: (E2E - TTFT) / (output tokens - 1), per request with > 1 token.
- ITL: every gap between consecutive tokens of a request, pooled over requests (tokens produced together in
  one step, as with speculative decoding, arrive as one chunk: one gap).
- E2E: request sent -> last token.  Throughputs over the benchmark duration: from the benchmark start (the
  workload's t = 0, when the client starts sending; the first request is sent one inter-arrival gap later,
  as in vLLM) to the last completion.
- Goodput: requests per second meeting every SLO given (TTFT, TPOT, E2E, in ms as vLLM takes them).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

PERCENTILES = (50, 90, 95, 99)
EXACT_ITL_LIMIT = 2_000_000
"""Up to this many gaps ITL percentiles are exact; beyond, a log histogram with 0.3% resolution is used."""
_EDGES = np.geomspace(1e-7, 1e4, 8001)


class GapRecorder:
    """Accumulates inter-token gaps with bounded memory.

    Gaps arrive as single values with a multiplicity, or as *ramps*: the step times of a run of decode
    steps, ``const + Σ_v max(a_v + j·da_v, b_v + j·db_v)`` for j in [j0, j1), each counted ``weight`` times
    (every running sequence sees every step). Ramps are stored as their parameters (compact arrays) and
    expanded with NumPy in bulk; past ``EXACT_ITL_LIMIT`` gaps everything folds into a log histogram.
    """

    FLUSH = 250_000  # buffered entries before a bulk expansion

    def __init__(self) -> None:
        # buffers are cleared in place when flushed, so hot loops may keep bound ``append``/``extend`` methods
        self._points = array("d")  # (value, weight) pairs, interleaved
        self._ramps = array("d")  # per ramp: j0, j1, weight, const, then (a, da, b, db) per line
        self._width = 0
        self._exact_vals: list[np.ndarray] = []
        self._exact_wts: list[np.ndarray] = []
        self._stored = 0
        self.hist: np.ndarray | None = None
        self.count = 0
        self.total = 0.0

    def add(self, value: float, weight: float = 1.0) -> None:
        """One gap value seen ``weight`` times."""
        self._points.extend((value, weight))

    def point_buffer(self) -> array:
        """The raw buffer of single gaps: hot loops extend it with ``(value, weight)`` (same as :meth:`add`)."""
        return self._points

    def ramp_buffer(self, lines: int) -> array:
        """The raw ramp buffer for runs with ``lines`` context-dependent operators: callers extend it with
        ``(j0, j1, weight, const, a, da, b, db, ...)`` (for speed) and call :meth:`maybe_flush` now and then."""
        width = 4 + 4 * lines
        if self._width and width != self._width:
            self._flush()
        self._width = width
        return self._ramps

    def maybe_flush(self) -> None:
        """Bound memory: expand buffered gaps once they grow large."""
        if len(self._points) >= 2 * self.FLUSH or len(self._ramps) >= self.FLUSH * max(self._width, 1):
            self._flush()

    def add_many(self, values: np.ndarray, weights: np.ndarray | None = None) -> None:
        values = np.asarray(values, dtype=float).ravel()
        weights = np.ones(values.size) if weights is None else np.asarray(weights, float).ravel()
        self._points.extend(np.column_stack([values, weights]).ravel().tolist())
        self.maybe_flush()

    def add_ramp(
        self, const: float, lines: list[tuple[float, float, float, float]], j0: int, j1: int, weight: float
    ) -> None:
        """Steps j0..j1-1 of a decode run (see class docstring), each seen ``weight`` times."""
        if j1 <= j0 or weight <= 0:
            return
        width = 4 + 4 * len(lines)
        if self._width and width != self._width:
            self._flush()
        self._width = width
        r = self._ramps
        r.extend((j0, j1, weight, const))
        for line in lines:
            r.extend(line)

    def _flush(self) -> None:
        chunks_v, chunks_w = [], []
        if self._points:
            pairs = np.array(self._points, dtype=float).reshape(-1, 2)
            chunks_v.append(pairs[:, 0].copy())
            chunks_w.append(pairs[:, 1].copy())
            del self._points[:]
        if self._ramps:
            ramps = np.array(self._ramps, dtype=float).reshape(-1, self._width)
            del self._ramps[:]
            if self.hist is not None:
                ramps = self._bin_flat_ramps(ramps)
            for start in range(0, len(ramps), 20_000):
                v, w = _expand(ramps[start : start + 20_000])
                chunks_v.append(v)
                chunks_w.append(w)
        for v, w in zip(chunks_v, chunks_w, strict=True):
            self._absorb(v, w)

    def _bin_flat_ramps(self, ramps: np.ndarray) -> np.ndarray:
        """Histogram mode: a ramp whose first and last steps fall in the same bin lands there whole (step times
        only grow along a run, so every step in between does too). Returns the ramps that need expanding."""
        assert self.hist is not None  # histogram mode only
        j0, j1, w = ramps[:, 0], ramps[:, 1], ramps[:, 2]
        first = _ramp_values(ramps, j0)
        last = _ramp_values(ramps, j1 - 1)
        b0 = np.clip(np.searchsorted(_EDGES, first, side="right") - 1, 0, _EDGES.size - 2)
        b1 = np.clip(np.searchsorted(_EDGES, last, side="right") - 1, 0, _EDGES.size - 2)
        flat = b0 == b1
        if flat.any():
            steps = (j1 - j0)[flat]
            weights = steps * w[flat]
            self.count += int(weights.sum())
            # exact sum of the ramp's step times: the mean of its ends is exact for one line, and within the
            # bin's 0.3% for a kinked one
            self.total += float(((first[flat] + last[flat]) / 2 * weights).sum())
            self.hist += np.bincount(b0[flat], weights=weights, minlength=_EDGES.size - 1)
        return ramps[~flat]

    def _absorb(self, values: np.ndarray, weights: np.ndarray) -> None:
        keep = weights > 0
        values, weights = values[keep], weights[keep]
        self.count += int(weights.sum())
        self.total += float((values * weights).sum())
        if self.hist is None:
            self._exact_vals.append(values)
            self._exact_wts.append(weights)
            self._stored += int(weights.sum())
            if self._stored > EXACT_ITL_LIMIT:
                self.hist = np.zeros(_EDGES.size - 1)
                for v, w in zip(self._exact_vals, self._exact_wts, strict=True):
                    self._bin(v, w)
                self._exact_vals, self._exact_wts = [], []
        else:
            self._bin(values, weights)

    def _bin(self, values: np.ndarray, weights: np.ndarray) -> None:
        idx = np.clip(np.searchsorted(_EDGES, values, side="right") - 1, 0, _EDGES.size - 2)
        assert self.hist is not None  # histogram mode only
        self.hist += np.bincount(idx, weights=weights, minlength=_EDGES.size - 1)

    def stats(self) -> dict[str, float]:
        self._flush()
        if self.count == 0:
            return _empty_stats()
        mean = self.total / self.count
        if self.hist is None:
            values = np.repeat(np.concatenate(self._exact_vals), np.concatenate(self._exact_wts).astype(np.int64))
            return _stats(values) | {"mean": mean}
        cdf = np.cumsum(self.hist) / self.hist.sum()
        mids = np.sqrt(_EDGES[:-1] * _EDGES[1:])
        out = {"mean": mean, "std": float("nan")}
        for p in PERCENTILES:
            out[f"p{p}"] = float(mids[min(int(np.searchsorted(cdf, p / 100)), mids.size - 1)])
        return out


def _ramp_values(ramps: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Step time at index j of each ramp."""
    values = ramps[:, 3].copy()
    for col in range(4, ramps.shape[1], 4):
        values += np.maximum(ramps[:, col] + j * ramps[:, col + 1], ramps[:, col + 2] + j * ramps[:, col + 3])
    return values


def _expand(ramps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every step value of a block of ramps (rows: j0, j1, weight, const, lines...)."""
    j0, j1 = ramps[:, 0].astype(np.int64), ramps[:, 1].astype(np.int64)
    lengths = j1 - j0
    idx = np.repeat(np.arange(len(ramps)), lengths)
    offsets = np.cumsum(lengths) - lengths
    j = np.arange(int(lengths.sum())) - np.repeat(offsets, lengths) + np.repeat(j0, lengths)
    values = ramps[idx, 3].copy()
    for col in range(4, ramps.shape[1], 4):
        a, da, b, db = (ramps[idx, col + c] for c in range(4))
        values += np.maximum(a + j * da, b + j * db)
    return values, ramps[idx, 2]


def _empty_stats() -> dict[str, float]:
    return {"mean": float("nan"), "std": float("nan")} | {f"p{p}": float("nan") for p in PERCENTILES}


def _stats(values: np.ndarray) -> dict[str, float]:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return _empty_stats()
    pct = np.percentile(values, PERCENTILES)
    return {"mean": float(values.mean()), "std": float(values.std())} | {
        f"p{p}": float(v) for p, v in zip(PERCENTILES, pct, strict=True)
    }


_SLO_KEYS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2el": "e2e_s", "e2e": "e2e_s"}


@dataclass(frozen=True)
class SLO:
    """Service-level objectives in seconds (None = not constrained)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    @classmethod
    def parse(cls, specs: list[str] | str | None) -> SLO | None:
        """Parse vLLM-style goodput specs: ``["ttft:200", "tpot:50", "e2el:2000"]`` (milliseconds)."""
        from infercast.errors import InfercastError, require_positive_number

        if specs is None:
            return None
        if isinstance(specs, str):
            specs = specs.replace(",", " ").split()
        if isinstance(specs, list | tuple) and not specs:  # '--goodput ""' must not silently drop the SLO
            raise InfercastError("needs at least one SLO like 'ttft:200 tpot:50' (ms), got nothing", field="goodput")
        elif not isinstance(specs, list | tuple):
            raise InfercastError(f"expected specs like 'ttft:200 tpot:50' (ms), got {specs!r}", field="goodput")
        values: dict[str, float] = {}
        for spec in specs:
            if not isinstance(spec, str):
                raise InfercastError(
                    f"expected specs like 'ttft:200' (name:milliseconds), got {spec!r}", field="goodput"
                )
            name, _, ms = spec.partition(":")
            key = _SLO_KEYS.get(name.strip().lower())
            if key is None:
                raise InfercastError(f"unknown SLO {name!r}; allowed: ttft, tpot, e2el (values in ms)", field="goodput")
            try:
                value = require_positive_number("goodput", ms.strip())
            except InfercastError:
                raise InfercastError(
                    f"SLO {spec!r} needs a finite number of milliseconds > 0, e.g. ttft:200", field="goodput"
                ) from None
            if key in values:
                raise InfercastError(f"SLO {name.strip()!r} given twice", field="goodput")
            values[key] = value / 1e3
        return cls(**values)

    def met(self, ttft: np.ndarray, tpot: np.ndarray, e2e: np.ndarray) -> np.ndarray:
        ok = np.ones(ttft.size, bool)
        if self.ttft_s is not None:
            ok &= ttft <= self.ttft_s
        if self.tpot_s is not None:
            ok &= ~(tpot > self.tpot_s)  # requests with one output token have no TPOT and pass
        if self.e2e_s is not None:
            ok &= e2e <= self.e2e_s
        return ok

    def to_dict(self) -> dict[str, float | None]:
        return {"ttft_ms": _ms(self.ttft_s), "tpot_ms": _ms(self.tpot_s), "e2el_ms": _ms(self.e2e_s)}

    def describe(self) -> str:
        """The limits as text: ``ttft ≤ 200 ms, tpot ≤ 50 ms``."""
        return slo_text(self.to_dict())


def slo_text(limits: dict[str, float | None]) -> str:
    """SLO limits as :meth:`SLO.to_dict` (or a summary's ``slo``) gives them, as text: ``ttft ≤ 200 ms, ...``."""
    return ", ".join(f"{k.removesuffix('_ms')} ≤ {v:g} ms" for k, v in limits.items() if v is not None)


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1e3


def request_metrics(arrival: np.ndarray, first: np.ndarray, finish: np.ndarray, output: np.ndarray):
    """Per-request TTFT, TPOT (NaN for single-token outputs) and E2E latency."""
    ttft = first - arrival
    e2e = finish - arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (e2e - ttft) / (output - 1), np.nan)
    return ttft, tpot, e2e


def latency_stats(values: np.ndarray) -> dict[str, float]:
    return _stats(np.asarray(values, dtype=float))
