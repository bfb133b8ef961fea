"""Time-varying load: the units needed through a day, an autoscaling what-if with a scale-up delay, and its
cost against a fixed fleet sized for the peak.

A load profile is a rate per interval: a ``diurnal`` shape (cosine between the peak and ``trough`` x peak,
lowest at 04:00), a CSV of ``hour`` or ``time_s`` with ``rate_req_s``, or a request trace binned into
intervals. The autoscaler reacts to the current rate (perfect observation, no forecast): it orders the units
the rate needs, which serve only ``scale_up_delay_s`` later (booting units are billed); it releases units as
soon as they are not needed. While the rate exceeds the ready units' capacity, requests over it are at risk of
missing the SLO — reported as the share of the day's requests arriving above capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.errors import InfercastError, require_fraction, require_positive_number
from infercast.files import check_input_file, is_file
from infercast.plan.costing import replicas_needed
from infercast.sim.workload.core import _numeric_column, _read_csv

DAY_S = 86_400.0
DEFAULT_TROUGH = 0.3
"""``diurnal`` without a trough: the quietest hour carries 30 % of the peak rate (an illustrative shape, not
a measurement; give ``diurnal:F`` or a CSV of real rates)."""
TROUGH_HOUR = 4.0
STEP_S = 60.0
"""The autoscaler acts once a minute."""
MAX_PROFILE_S = 366 * DAY_S
"""Longest load profile replayed (a year): the autoscaler steps through it every STEP_S, so a profile of
1e15 s asked for a 243 TiB array."""


@dataclass(frozen=True)
class LoadProfile:
    """Rates (req/s) over consecutive intervals of ``interval_s`` seconds starting at t = 0."""

    rates: np.ndarray
    interval_s: float
    source: str

    def __post_init__(self) -> None:
        rates = np.asarray(self.rates, dtype=float)
        if rates.ndim != 1 or rates.size == 0 or not np.isfinite(rates).all() or (rates < 0).any():
            raise InfercastError("rates must be finite numbers >= 0, at least one", field="daily")
        object.__setattr__(self, "rates", rates)
        require_positive_number("interval", self.interval_s)

    @property
    def peak(self) -> float:
        return float(self.rates.max())

    @property
    def duration_s(self) -> float:
        return self.rates.size * self.interval_s


def diurnal(peak: float, trough: float = DEFAULT_TROUGH, intervals: int = 96) -> LoadProfile:
    """A day in ``intervals`` steps: ``peak`` req/s at 16:00, ``trough`` x peak at 04:00, cosine between."""
    peak = require_positive_number("rate", peak)
    trough = require_fraction("daily", trough, low=0.0)
    hours = (np.arange(intervals) + 0.5) * 24.0 / intervals
    shape = 0.5 * (1 - np.cos(2 * np.pi * (hours - TROUGH_HOUR) / 24.0))
    return LoadProfile(peak * (trough + (1 - trough) * shape), DAY_S / intervals, f"diurnal (trough {trough:g})")


def load_profile(spec: str | Path, peak: float | None = None, interval_s: float = 900.0) -> LoadProfile:
    """``diurnal`` / ``diurnal:0.25`` (needs ``peak``), a CSV of rates (``hour`` or ``time_s``, ``rate_req_s``)
    or a trace CSV (``arrived_at``), binned into ``interval_s`` intervals."""
    text = str(spec).strip()
    if text.lower().startswith("diurnal"):
        _, _, trough = text.partition(":")
        try:
            value = float(trough) if trough else DEFAULT_TROUGH
        except ValueError:
            raise InfercastError(
                f"expected diurnal or diurnal:F (trough fraction), got {text!r}", field="daily"
            ) from None
        if peak is None:
            raise InfercastError("a diurnal profile needs the peak rate (`rate`)", field="rate")
        return diurnal(peak, value)
    path = Path(text).expanduser()
    if not is_file(path):
        raise InfercastError(f"{text!r} is neither 'diurnal[:F]' nor a CSV file", field="daily")
    try:  # the trace readers' checks: missing, looping, unreadable, non-UTF-8, malformed, non-numeric cells
        df = _read_csv(check_input_file(path, "daily"))
        cols = {c.strip().lower(): c for c in df.columns}
        if "rate_req_s" in cols and ("hour" in cols or "time_s" in cols):
            t = _numeric_column(df, cols["hour"] if "hour" in cols else cols["time_s"], path)
            t = t * 3600 if "hour" in cols else t
            rates = _numeric_column(df, cols["rate_req_s"], path)
        elif "arrived_at" in cols:
            t = _numeric_column(df, cols["arrived_at"], path)
        else:
            t = None
    except InfercastError as exc:
        raise InfercastError(exc.message, field="daily") from None
    if t is not None and not (np.isfinite(t).all() and (np.abs(t) <= MAX_PROFILE_S).all()):
        raise InfercastError(f"{path.name}: times must be finite and within {MAX_PROFILE_S:g} s", field="daily")
    if t is not None and "arrived_at" not in cols:
        steps = np.diff(t)
        if t.size < 1 or (steps <= 0).any() or not np.allclose(steps, steps[0] if steps.size else 1.0):
            raise InfercastError(f"{path.name}: times must be evenly spaced and increasing", field="daily")
        return LoadProfile(rates, float(steps[0]) if steps.size else DAY_S, path.name)
    if t is not None:
        if (t < 0).any():
            raise InfercastError(f"{path.name}: arrival times must be >= 0", field="daily")
        n = max(math.ceil((t.max() + 1e-9) / interval_s), 1)
        counts = np.bincount(np.minimum((t // interval_s).astype(int), n - 1), minlength=n)
        return LoadProfile(counts / interval_s, interval_s, f"{path.name} binned per {interval_s:g} s")
    raise InfercastError(
        f"{path.name}: needs columns hour or time_s with rate_req_s, or a trace's arrived_at", field="daily"
    )


@dataclass
class Autoscaling:
    """Units per interval under autoscaling vs a fixed fleet for the peak, with costs over the profile."""

    intervals: pd.DataFrame
    fixed_units: int
    fixed_usd: float
    autoscaled_usd: float
    requests_above_capacity: float
    scale_up_delay_s: float
    source: str

    @property
    def saving(self) -> float:
        return 1 - self.autoscaled_usd / self.fixed_usd if self.fixed_usd > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "scale_up_delay_s": self.scale_up_delay_s,
            "fixed_units": self.fixed_units,
            "fixed_usd": self.fixed_usd,
            "autoscaled_usd": self.autoscaled_usd,
            "saving": self.saving,
            "requests_above_capacity": self.requests_above_capacity,
            "intervals": self.intervals.to_dict(orient="records"),
        }


def autoscale(
    profile: LoadProfile,
    max_rate: float,
    unit_usd_per_hour: float,
    scale_up_delay_s: float = 300.0,
    step_s: float = STEP_S,
) -> Autoscaling:
    """Replay ``profile`` against a reactive autoscaler of units that serve ``max_rate`` req/s each."""
    max_rate = require_positive_number("max_rate", max_rate)
    delay = require_positive_number("scale_up_delay", scale_up_delay_s, allow_zero=True)
    n_steps = max(round(profile.duration_s / step_s), 1)
    dt = profile.duration_s / n_steps
    t = np.arange(n_steps) * dt
    rate = profile.rates[np.minimum((t // profile.interval_s).astype(int), profile.rates.size - 1)]
    need = np.array([replicas_needed(r, max_rate) for r in rate])
    ready = int(need[0])  # the day starts with the fleet the first interval needs
    pending: list[tuple[float, int]] = []  # (ready at, units)
    ready_s = np.zeros(n_steps, int)
    billed_s = np.zeros(n_steps, int)
    for k in range(n_steps):
        now = t[k]
        ready += sum(u for at, u in pending if at <= now)
        pending = [(at, u) for at, u in pending if at > now]
        target = int(need[k])
        booting = sum(u for _, u in pending)
        if target > ready + booting:
            pending.append((now + delay, target - ready - booting))
            if delay == 0:
                ready, pending = target, []
        elif target < ready + booting:
            excess = ready + booting - target
            while pending and excess:  # cancel boots first, newest first
                at, u = pending.pop()
                cut = min(u, excess)
                excess -= cut
                if u > cut:
                    pending.append((at, u - cut))
            ready -= min(excess, ready)
        ready_s[k] = ready
        billed_s[k] = ready + sum(u for _, u in pending)
    served = np.minimum(rate, ready_s * max_rate)
    arrived = float((rate * dt).sum())
    above = float(((rate - served) * dt).sum()) / arrived if arrived > 0 else 0.0
    per = max(round(profile.interval_s / dt), 1)
    rows = []
    for i in range(profile.rates.size):
        sl = slice(i * per, min((i + 1) * per, n_steps))
        rows.append(
            {
                "start_h": i * profile.interval_s / 3600,
                "rate_req_s": float(profile.rates[i]),
                "units_needed": int(need[sl].max()),
                "units_ready_min": int(ready_s[sl].min()),
                "units_billed_mean": float(billed_s[sl].mean()),
            }
        )
    fixed_units = int(need.max())
    hours = profile.duration_s / 3600
    return Autoscaling(
        intervals=pd.DataFrame(rows),
        fixed_units=fixed_units,
        fixed_usd=fixed_units * unit_usd_per_hour * hours,
        autoscaled_usd=float(billed_s.sum() * dt / 3600 * unit_usd_per_hour),
        requests_above_capacity=above,
        scale_up_delay_s=delay,
        source=profile.source,
    )
