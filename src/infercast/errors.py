"""User-facing errors: each names the field that is wrong and what is allowed instead."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable


class InfercastError(ValueError):
    """An input or configuration problem the user can fix.

    The CLI prints ``str(error)`` on one line and exits with status 2; the Python API raises it.
    """

    def __init__(self, message: str, *, field: str | None = None, allowed: Iterable[str] | None = None):
        self.field = field
        self.allowed = list(allowed) if allowed is not None else None
        self.message = message
        """The text without the ``field:`` prefix (for callers that quote the reason inside another message)."""
        text = f"{field}: {message}" if field else message
        super().__init__(text)


class DoesNotFitError(InfercastError):
    """The configuration needs more memory than the hardware has."""


def nearest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Closest valid names to ``name`` (by edit similarity), for 'did you mean' hints."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.45)
    if not hits:
        hits = [c for c in lowered if name.lower() in c or c in name.lower()][:n]
    return [lowered[h] for h in hits]


def unknown_choice(field: str, value: str, choices: Iterable[str]) -> InfercastError:
    """Error for a name that is not in a catalog, with the nearest valid names."""
    choices = sorted(choices)
    close = nearest(value, choices)
    hint = f"did you mean {', '.join(close)}?" if close else f"allowed: {', '.join(choices)}"
    if close:
        hint += f" (all: {', '.join(choices)})" if len(choices) <= 12 else ""
    return InfercastError(f"unknown value {value!r}; {hint}", field=field, allowed=choices)


def require_positive_int(field: str, value: object, *, minimum: int = 1) -> int:
    """Validate a size/count argument: an integer >= ``minimum`` (bools and floats with fractions refused)."""
    if type(value) is int and value >= minimum:  # the common case, answered before the general checks
        return value
    if isinstance(value, bool):
        raise InfercastError(f"must be an integer >= {minimum}, got {value!r}", field=field)
    if isinstance(value, float):
        if not value.is_integer():
            raise InfercastError(f"must be an integer >= {minimum}, got {value!r}", field=field)
        value = int(value)
    try:
        ivalue = int(value)  # type: ignore[call-overload]  # an object: int() raises, mapped below
    except (TypeError, ValueError):
        raise InfercastError(f"must be an integer >= {minimum}, got {value!r}", field=field) from None
    if ivalue != value and not isinstance(value, str):
        raise InfercastError(f"must be an integer >= {minimum}, got {value!r}", field=field)
    if ivalue < minimum:
        raise InfercastError(f"must be an integer >= {minimum}, got {ivalue}", field=field)
    return ivalue


def require_fraction(field: str, value: float, *, low: float = 0.0, high: float = 1.0) -> float:
    """Validate a fraction in (low, high]."""
    try:
        fvalue = float(value)
    except (TypeError, ValueError):
        raise InfercastError(f"must be a number in ({low}, {high}], got {value!r}", field=field) from None
    if not (low < fvalue <= high):
        raise InfercastError(f"must be in ({low}, {high}], got {fvalue}", field=field)
    return fvalue


def require_positive_number(field: str, value: object, *, allow_zero: bool = False, allow_inf: bool = False) -> float:
    """Validate a rate/duration/size given as a real number: > 0 (or >= 0), finite unless ``allow_inf``."""
    bound = ">= 0" if allow_zero else "> 0"
    kind = "number" if allow_inf else "finite number"
    if isinstance(value, bool):
        raise InfercastError(f"must be a {kind} {bound}, got {value!r}", field=field)
    try:
        fvalue = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InfercastError(f"must be a {kind} {bound}, got {value!r}", field=field) from None
    ok = (fvalue >= 0 if allow_zero else fvalue > 0) and (allow_inf or math.isfinite(fvalue))
    if not ok or math.isnan(fvalue):
        raise InfercastError(f"must be a {kind} {bound}, got {value!r}", field=field)
    return fvalue


_DURATION = re.compile(r"^\s*(?P<num>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>ms|s|us|µs|μs)?\s*$")
_UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, None: 1e-3}


def parse_duration(field: str, text: str) -> float:
    """'200ms', '0.2s', '500us' or a bare number of milliseconds ('200') -> seconds (> 0)."""
    match = _DURATION.match(str(text))
    if match is None:
        raise InfercastError(
            f"expected a time like 200ms, 0.2s or 500us (a bare number means ms), got {text!r}", field=field
        )
    number = float(match["num"])
    seconds = number * _UNIT_S[match["unit"]]
    if not (seconds > 0 and math.isfinite(seconds)):
        raise InfercastError(f"must be > 0, got {text!r}", field=field)
    if match["unit"] is None and number < 1:
        # below a millisecond no LLM step finishes: a bare 0.5 is far likelier meant as seconds than as 500 us
        raise InfercastError(
            f"a bare number is milliseconds, so {text.strip()} would be {number * 1e3:g} us; write "
            f"the unit: {number:g}s or {number * 1e3:g}ms",
            field=field,
        )
    return seconds
