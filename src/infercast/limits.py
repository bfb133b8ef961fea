"""What this machine can hold: sizes that would allocate more than its memory are refused up front.

An option such as ``--num-requests`` or ``--max-num-seqs`` sizes arrays; a value that cannot be held is
an :class:`~infercast.errors.InfercastError` that says how much it needs and what the limit is, instead of a
``MemoryError`` (or minutes of swapping) half-way through a run.
"""

from __future__ import annotations

import os
from functools import cache

from infercast.errors import InfercastError, require_positive_int

MEMORY_SHARE = 0.5
"""Share of physical memory one array family may take (the rest: the interpreter, NumPy temporaries, others)."""
FALLBACK_MEMORY_BYTES = 8 * 1024**3
"""Assumed physical memory where the OS does not report it (8 GiB)."""

BYTES_PER_REQUEST = 512
"""Simulator memory per request: measured peak ~250 B/request (tracemalloc, 80k requests, RequestTable +
workload + metrics), doubled for block-hash lists and per-request exports."""
BYTES_PER_SEQUENCE_SLOT = 2048
"""Per ``max_num_seqs`` slot: measured ~1.9 kB/slot (tracemalloc, max_num_seqs=100000: the compiled decode-cost
table and the per-slot arrays); the simulator sizes them by min(max_num_seqs, requests)."""
MAX_GRID_VALUES = 100_000
"""Values one list option (``--batches 1:100000``) may expand to; the grid's rows are checked separately."""
BYTES_PER_SWEEP_ROW = 1024
"""``sweep``: ~40 float64/int64 output columns per row plus intermediate arrays (~1 KiB)."""


CGROUP_LIMIT_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""A container's memory limit (cgroup v2, then v1): 'max' or a huge number means none."""


@cache
def memory_limit_bytes() -> int:
    """Bytes one array family may use: :data:`MEMORY_SHARE` of physical memory, or of the container's cgroup
    limit where that is smaller (a process over it is killed, not refused)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        total = FALLBACK_MEMORY_BYTES
    return int(min(total, cgroup_limit_bytes() or total) * MEMORY_SHARE)


def cgroup_limit_bytes(files: tuple[str, ...] = CGROUP_LIMIT_FILES) -> int | None:
    """The first cgroup memory limit found in ``files`` (bytes), None where there is none or it cannot be read."""
    for name in files:
        try:
            with open(name) as handle:
                text = handle.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # v1 writes ~2^63 for "no limit"
            return int(text)
        return None  # present but 'max' (v2) or unlimited: no limit
    return None


def _gib(n: float) -> str:
    return f"{n / 1024**3:.1f} GiB" if n >= 1024**3 / 10 else f"{n / 1024**2:.0f} MiB"


def max_count(bytes_each: int) -> int:
    """Most items of ``bytes_each`` bytes that fit in :func:`memory_limit_bytes`."""
    return max(memory_limit_bytes() // bytes_each, 1)


def require_count(field: str, value: object, bytes_each: int, *, minimum: int = 1, what: str = "") -> int:
    """An integer >= ``minimum`` whose arrays fit in memory, e.g. ``--num-requests: 2147483648 needs 1024.0 GiB;
    the limit on this machine is 16777216 (8.0 GiB)``."""
    count = require_positive_int(field, value, minimum=minimum)
    limit = max_count(bytes_each)
    if count > limit:
        raise InfercastError(
            f"{count} needs {_gib(count * bytes_each)}{' ' + what if what else ''}; the limit on this "
            f"machine is {limit} ({_gib(memory_limit_bytes())})",
            field=field,
        )
    return count


def check_rows(field: str, rows: int, bytes_each: int, what: str) -> None:
    """Refuse a product of options (e.g. a sweep grid) with more rows than memory holds."""
    limit = max_count(bytes_each)
    if rows > limit:
        raise InfercastError(
            f"{rows:,} {what} need {_gib(rows * bytes_each)}; the limit on this machine is {limit:,} "
            f"({_gib(memory_limit_bytes())})",
            field=field,
        )
