"""Trace replay: Azure LLM inference 2023 CSVs (vidur's processed form), Mooncake/FAST'25 JSONL, built-ins."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from infercast.errors import InfercastError, require_positive_int, require_positive_number, unknown_choice
from infercast.files import check_input_file, parse_json
from infercast.sim.workload.core import (
    _ARRIVAL_COLS,
    _OUTPUT_COLS,
    _PROMPT_COLS,
    DEFAULT_HASH_BLOCK_SIZE,
    MAX_ARRIVAL_SECONDS,
    Workload,
    _any_shared,
    _flatten,
    _numeric_column,
    _pick_column,
    _read_csv,
)

BUILTIN_TRACES = {"azure_conv": "azure_conv_2023.csv", "azure_code": "azure_code_2023.csv"}
MOONCAKE_BLOCK_SIZE = 512  # tokens per hash id in the Mooncake / FAST'25 traces
TRACE_SUFFIXES = (".csv", ".jsonl", ".json")


MAX_TRACE_TOKENS = 2**31 - 1
"""Longest prompt or output a trace line may give (int32): beyond it lengths would wrap in int64 products."""
MAX_TRACE_SECONDS = MAX_ARRIVAL_SECONDS
"""Latest arrival a trace may give, in seconds after its first request (~300 years)."""
MAX_HASH_ID = 2**63 - 1


def _check_path(path: str | Path) -> Path:
    return check_input_file(path, "path")  # missing, folder, symlink loop, unreadable: one line each


def _finish_trace(
    times: np.ndarray,
    prompt: np.ndarray,
    output: np.ndarray,
    lines: np.ndarray,
    path: Path,
    *,
    hashes: list[np.ndarray] | None,
    hash_block_size: int,
    time_scale: float,
    max_requests: int | None,
    name: str | None,
) -> Workload:
    """Validate per-line, sort by arrival, make times relative to the first request, scale, cut."""
    scale = require_positive_number("time_scale", time_scale)
    if max_requests is not None:
        max_requests = require_positive_int("max_requests", max_requests)
    if len(times) == 0:
        raise InfercastError(f"{path} has no requests (empty trace)", field="path")
    checks = (
        (
            "arrival time",
            times,
            ~np.isfinite(times) | (times < 0) | (times > MAX_TRACE_SECONDS),
            f"finite, >= 0 and <= {MAX_TRACE_SECONDS:g} s",
        ),
        (
            "prompt length",
            prompt,
            ~((prompt >= 1) & (prompt <= MAX_TRACE_TOKENS)) | (prompt != np.round(prompt)),
            f"an integer in [1, {MAX_TRACE_TOKENS}]",
        ),
        (
            "output length",
            output,
            ~((output >= 1) & (output <= MAX_TRACE_TOKENS)) | (output != np.round(output)),
            f"an integer in [1, {MAX_TRACE_TOKENS}]",
        ),
    )
    for what, arr, bad, rule in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise InfercastError(f"{path}, line {int(lines[i])}: {what} {float(arr[i]):g} must be {rule}", field="path")
    order = np.argsort(times, kind="stable")  # documented: traces are replayed in arrival order
    if max_requests is not None:
        order = order[:max_requests]
    t = times[order]
    t = (t - t[0]) * scale
    if hashes is not None:
        hashes = [hashes[i] for i in order.tolist()]
        flat, _ = _flatten(hashes)
        if not _any_shared(flat):
            hashes = None
    return Workload(
        t,
        prompt[order].astype(np.int64),
        output[order].astype(np.int64),
        hashes,
        hash_block_size,
        None,
        name if name is not None else path.stem,
    )


def load_trace_csv(
    path: str | Path, *, time_scale: float = 1.0, max_requests: int | None = None, name: str | None = None
) -> Workload:
    """Replay a CSV trace with columns ``arrived_at,num_prefill_tokens,num_decode_tokens`` (vidur's processed form).

    ``arrived_at`` is in seconds; times are made relative to the first request and multiplied by
    ``time_scale`` (0.5 replays twice as fast). Rows out of order are sorted by arrival. ``max_requests``
    keeps the first N. Columns named ``arrival,prompt_len,output_len`` (as :meth:`Workload.to_frame` writes)
    are accepted too; extra columns are ignored.
    """
    p = _check_path(path)
    df = _read_csv(p)
    cols = {}
    for key, aliases in (("arrival", _ARRIVAL_COLS), ("prompt", _PROMPT_COLS), ("output", _OUTPUT_COLS)):
        col = _pick_column(df, aliases)
        if col is None:
            raise InfercastError(
                f"{p}: missing column {aliases[1]!r} (expected arrived_at,num_prefill_tokens,num_decode_tokens; "
                f"found {','.join(map(str, df.columns))})",
                field="path",
            )
        cols[key] = col
    if len(df) == 0:
        raise InfercastError(f"{p} has a header but no requests (empty trace)", field="path")
    values = {k: _numeric_column(df, c, p) for k, c in cols.items()}
    lines = np.arange(2, len(df) + 2)
    return _finish_trace(
        values["arrival"],
        values["prompt"],
        values["output"],
        lines,
        p,
        hashes=None,
        hash_block_size=DEFAULT_HASH_BLOCK_SIZE,
        time_scale=time_scale,
        max_requests=max_requests,
        name=name,
    )


def load_mooncake_jsonl(
    path: str | Path, *, time_scale: float = 1.0, max_requests: int | None = None, name: str | None = None
) -> Workload:
    """Replay a Mooncake (FAST'25, kvcache-ai/Mooncake ``FAST25-release/traces/*.jsonl``) trace.

    One JSON object per line::

        {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ..., 2354]}

    ``timestamp``: arrival in milliseconds since the trace start (several requests may share one);
    ``input_length`` / ``output_length``: tokens; ``hash_ids``: ids of the prompt's consecutive 512-token
    blocks (``ceil(input_length / 512)`` of them, the last possibly partial); equal leading ids mean a shared
    prefix. ``hash_ids`` may be missing (nothing shared). Extra ids beyond ``ceil(input_length / 512)`` are
    dropped. Times become seconds relative to the first request, times ``time_scale``.
    """
    p = _check_path(path)
    times: list[float] = []
    prompt: list[float] = []
    output: list[float] = []
    hashes: list[np.ndarray] = []
    lines: list[int] = []
    empty = np.zeros(0, np.int64)
    for lineno, line in _jsonl_lines(p):
        obj = parse_json(line, f"{p}, line {lineno}", "path")
        if not isinstance(obj, dict):
            raise InfercastError(f"{p}, line {lineno}: expected a JSON object", field="path")
        try:
            t, i, o = obj["timestamp"], obj["input_length"], obj["output_length"]
        except KeyError as exc:
            raise InfercastError(
                f"{p}, line {lineno}: missing key {exc.args[0]!r} (need timestamp, input_length, output_length)",
                field="path",
            ) from None
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (t, i, o)):
            raise InfercastError(
                f"{p}, line {lineno}: timestamp, input_length and output_length must be numbers", field="path"
            )
        ids = obj.get("hash_ids")
        if ids is not None and (
            not isinstance(ids, list)
            or not all(isinstance(h, int) and not isinstance(h, bool) and 0 <= h <= MAX_HASH_ID for h in ids)
        ):
            raise InfercastError(f"{p}, line {lineno}: hash_ids must be a list of integers in [0, 2^63)", field="path")
        if not ids:
            arr = empty
        else:
            arr = np.asarray(ids[: max(-(-int(i) // MOONCAKE_BLOCK_SIZE), 0)], dtype=np.int64)
        times.append(float(t) / 1000.0)
        prompt.append(float(i))
        output.append(float(o))
        hashes.append(arr)
        lines.append(lineno)
    return _finish_trace(
        np.asarray(times),
        np.asarray(prompt),
        np.asarray(output),
        np.asarray(lines),
        p,
        hashes=hashes,
        hash_block_size=MOONCAKE_BLOCK_SIZE,
        time_scale=time_scale,
        max_requests=max_requests,
        name=name,
    )


def _jsonl_lines(path: Path):
    """(line number, stripped text) of each non-empty line; unreadable or non-UTF-8 files are one-line errors."""
    try:
        with path.open(encoding="utf-8") as handle:
            lines = [(n, line.strip()) for n, line in enumerate(handle, 1)]
    except OSError as exc:
        raise InfercastError(f"cannot read {path} ({exc.strerror or exc})", field="path") from None
    except UnicodeDecodeError as exc:
        raise InfercastError(f"{path} is not UTF-8 text (byte {exc.start} of a line)", field="path") from None
    return [(n, line) for n, line in lines if line]


def load_trace(path: str | Path, **kwargs: Any) -> Workload:
    """Load a trace by extension: ``.csv`` -> :func:`load_trace_csv`, ``.jsonl``/``.json`` -> Mooncake."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".csv":
        return load_trace_csv(p, **kwargs)
    if suffix in (".jsonl", ".json"):
        return load_mooncake_jsonl(p, **kwargs)
    raise InfercastError(
        f"cannot tell the format of {p} from its extension; allowed: {', '.join(TRACE_SUFFIXES)}",
        field="path",
        allowed=TRACE_SUFFIXES,
    )


def builtin_key(name: str | Path) -> str | None:
    """The built-in trace ``name`` spells (``azure_conv``, ``AZURE_CONV_2023.csv``...), or None."""
    key = str(name).strip().lower().removesuffix(".csv").removesuffix("_2023")
    return key if key in BUILTIN_TRACES else None


def builtin_trace(name: str, **kwargs: Any) -> Workload:
    """A trace shipped with infercast: ``"azure_conv"`` or ``"azure_code"`` (Azure LLM inference 2023).

    Keywords go to :func:`load_trace_csv` (``time_scale``, ``max_requests``).
    """
    key = builtin_key(name)
    if key is None:
        raise unknown_choice("trace", str(name), BUILTIN_TRACES)
    ref = resources.files("infercast").joinpath("data", "traces", BUILTIN_TRACES[key])
    kwargs.setdefault("name", key)
    with resources.as_file(ref) as p:
        return load_trace_csv(p, **kwargs)
