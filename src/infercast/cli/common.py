"""Shared CLI plumbing: JSON vs rich output, option types."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from rich.console import Console

console = Console(width=None if Console().is_terminal else 120)
err_console = Console(stderr=True)

JSON_HELP = "Print machine-readable JSON instead of tables."


def _default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return str(obj)


def _clean(obj: Any) -> Any:
    """Replace non-finite floats (not valid JSON) by None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def emit_json(data: Any) -> None:
    """Write ``data`` as JSON to stdout (plain print: no rich markup or wrapping)."""
    print(json.dumps(_clean(data), indent=2, default=_default))
