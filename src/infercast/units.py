"""The project's single pint unit registry.

Units live only at the edges (the tutorial-style API and display); the core models compute in plain SI
floats (seconds, bytes, FLOP). Byte prefixes are SI (``GB`` = 1e9 B), as in datasheets. A ``FLOP`` unit
of its own dimension lets rates read as ``TFLOPs/s``::

    >>> quantity(989.4e12, "FLOP/s").to("TFLOPs/s")
    <Quantity(989.4, 'teraFLOP / second')>
"""

from __future__ import annotations

from typing import Any

import pint

from infercast.display import si_prefix

ureg: pint.UnitRegistry = pint.UnitRegistry()
"""The one registry every infercast quantity belongs to (quantities of different registries do not mix)."""

# name = definition = symbol = aliases: "TFLOPs/s", "TFLOP/s", "GFLOPs", "flop" all parse.
ureg.define("FLOP = [computation] = FLOPs = flop = flops")
ureg.formatter.default_format = "~P"

Quantity = ureg.Quantity
"""Shorthand constructor: ``Quantity(16e9, "B")``."""


def quantity(value: float, unit: str) -> pint.Quantity:
    """A quantity of ``value`` in ``unit`` (any unit string the registry parses, e.g. ``"TB/s"``)."""
    return ureg.Quantity(float(value), unit)


def seconds(value: float) -> pint.Quantity:
    """A time in seconds."""
    return quantity(value, "s")


def nbytes(value: float) -> pint.Quantity:
    """A size in bytes (SI)."""
    return quantity(value, "B")


def is_quantity(value: Any) -> bool:
    """True for a pint quantity (of any registry)."""
    return isinstance(value, pint.Quantity)


def is_bytes(value: Any) -> bool:
    """True for a quantity whose dimension is bytes (information, not a rate)."""
    return is_quantity(value) and value.dimensionality == ureg.byte.dimensionality


def to_compact_si(value: pint.Quantity, base: str) -> pint.Quantity:
    """``value`` in the largest SI prefix of ``base`` (e.g. ``"B"``) that keeps the magnitude >= 1."""
    prefix, _ = si_prefix(float(value.to(base).magnitude))
    return value.to(f"{prefix}{base}")
