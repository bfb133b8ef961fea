"""Plain-text display helpers for notebooks and scripts: ``info`` (a titled key/value block) and ``table``.

Values may be pint quantities (4 significant digits and a compact unit: ``66.52 ms``, ``3.35 TB/s``; byte
sizes are rescaled to the largest SI prefix that keeps the value >= 1, e.g. ``16.06 GB``), numbers or
strings. Output goes through plain ``print`` so it reads the same when captured or piped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from rich.cells import cell_len

from infercast.units import is_bytes, is_quantity, to_compact_si

RULE = "─"
"""Character of heading rules and table separators."""

INFO_WIDTH = 44
"""Width of an ``info`` heading line."""


def format_number(x: float) -> str:
    """4 significant digits without exponent for everyday magnitudes: 66.52, 312, 0.2701, 12346."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    if x != 0 and 1e4 <= abs(x) < 1e15:
        return f"{x:.0f}"
    return f"{x:.4g}"


def format_value(value: Any) -> str:
    """Text for one displayed value (quantity, number, string or anything with a ``str``)."""
    if is_quantity(value):
        q = to_compact_si(value, "B") if is_bytes(value) else value
        unit = f"{q.units:~P}"
        mag = q.magnitude
        return f"{format_number(mag)} {unit}".strip() if unit else format_number(mag)
    if isinstance(value, int | float):
        return format_number(value)
    return str(value)


def _pad(text: str, width: int, *, left: bool) -> str:
    fill = " " * max(width - cell_len(text), 0)
    return text + fill if left else fill + text


def format_info(title: str, **fields: Any) -> str:
    """The text :func:`info` prints."""
    head = f"{RULE * 2} {title} "
    lines = [head + RULE * max(INFO_WIDTH - cell_len(head), 2)]
    keys = [f"{k.replace('_', ' ')}:" for k in fields]
    width = max((cell_len(k) for k in keys), default=0) + 2
    for key, value in zip(keys, fields.values(), strict=True):
        lines.append(_pad(key, width, left=True) + format_value(value))
    return "\n".join(lines)


def info(title: str, **fields: Any) -> None:
    """Print a heading with ``title`` and one aligned ``key: value`` line per field (``_`` in keys -> space)."""
    print(format_info(title, **fields))


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The text :func:`table` prints: first column left-aligned, the others right-aligned."""
    head = [str(h) for h in headers]
    body = [[format_value(v) for v in row] for row in rows]
    ncols = max([len(head), *(len(r) for r in body)])
    head += [""] * (ncols - len(head))
    body = [r + [""] * (ncols - len(r)) for r in body]
    widths = [max(cell_len(r[c]) for r in [head, *body]) for c in range(ncols)]

    def line(cells: list[str]) -> str:
        return "  ".join(_pad(cell, widths[c], left=c == 0) for c, cell in enumerate(cells)).rstrip()

    total = sum(widths) + 2 * (ncols - 1)
    return "\n".join([line(head), RULE * total, *(line(r) for r in body)])


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print an aligned text table of ``rows`` under ``headers``."""
    print(format_table(headers, rows))
