"""The :class:`Workload` container, its block-hash helpers, and the readers shared by the builders.

See :mod:`infercast.sim.workload` for what ``block_hashes`` mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.errors import InfercastError, require_positive_int

DEFAULT_HASH_BLOCK_SIZE = 16
"""Tokens per prompt-hash block when a workload does not say. Source: vLLM's default KV-cache block size on
CUDA GPUs (``--block-size``, 16 tokens); its prefix cache hashes prompts in blocks of that many tokens."""
MAX_ARRIVAL_SECONDS = 1e10
"""Latest arrival a workload may have (~300 years): float64 clocks there still resolve microseconds, so every
step and token gap stays distinct (at 1e300 s a step added nothing to the clock: TTFT and TPOT read 0)."""

RngLike = np.random.Generator | int | None

_INT64 = np.dtype(np.int64)
_DTYPE, _NDIM = attrgetter("dtype"), attrgetter("ndim")

# Column names accepted by load_trace_csv / from_frame (first one is canonical).
_ARRIVAL_COLS = ("arrival", "arrived_at", "arrival_time", "timestamp")
_PROMPT_COLS = ("prompt_len", "num_prefill_tokens", "input_length", "input_len")
_OUTPUT_COLS = ("output_len", "num_decode_tokens", "output_length")
_HASH_COLS = ("block_hashes", "hash_ids")


def _rng(rng: RngLike) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _int_array(values: Any, field: str) -> np.ndarray:
    """1-D int64 array from ints or integer-valued floats; InfercastError otherwise."""
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise InfercastError(f"must be an array of integers ({exc})", field=field) from None
    arr = arr.reshape(-1) if arr.ndim != 1 else arr
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            i = int(np.argmax(bad))
            raise InfercastError(f"must be whole numbers; request {i} has {float(arr[i]):g}", field=field)
        return arr.astype(np.int64)
    if arr.size == 0:
        return arr.astype(np.int64)
    raise InfercastError(f"must be an array of integers, got dtype {arr.dtype}", field=field)


def _flatten(hashes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All ids in one array plus the per-request counts."""
    counts = np.fromiter(map(len, hashes), dtype=np.int64, count=len(hashes))
    flat = np.concatenate(hashes).astype(np.int64, copy=False) if counts.sum() else np.zeros(0, np.int64)
    return flat, counts


def _split(flat: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """Per-request read-only views into ``flat``."""
    flat.flags.writeable = False
    ends = np.cumsum(counts)
    return [flat[e - c : e] for e, c in zip(ends.tolist(), counts.tolist(), strict=True)]


def _any_shared(flat: np.ndarray) -> bool:
    """Whether some id appears more than once (i.e. some prefix is shared)."""
    return flat.size > 1 and bool((np.diff(np.sort(flat)) == 0).any())


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise InfercastError(f"{path} is empty (empty trace)", field="path") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        text = " ".join(str(exc).split())
        raise InfercastError(f"{path}: malformed CSV ({text})", field="path") from None
    df.columns = [str(c).strip() for c in df.columns]
    return df


def _numeric_column(df: pd.DataFrame, column: str, path: Path) -> np.ndarray:
    values = pd.to_numeric(df[column], errors="coerce").to_numpy(np.float64)
    bad = np.isnan(values)
    if bad.any():
        i = int(np.argmax(bad))
        raise InfercastError(
            f"{path}, line {i + 2}: column {column!r} has {str(df[column].iloc[i])!r}, expected a number",
            field="path",
        )
    return values


# ----------------------------------------------------------------------------------------------------------
# Workload
# ----------------------------------------------------------------------------------------------------------
@dataclass(eq=False, repr=False)
class Workload:
    """Requests as parallel NumPy arrays (see the module docstring for ``block_hashes``).

    The constructor validates everything and sorts requests by arrival (stable) if they are out of order.
    For closed-loop workloads (``closed_loop=N`` clients) ``arrival`` is ignored (zeros by convention).
    """

    arrival: np.ndarray
    prompt_len: np.ndarray
    output_len: np.ndarray
    block_hashes: list[np.ndarray] | None = None
    hash_block_size: int = DEFAULT_HASH_BLOCK_SIZE
    closed_loop: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        prompt = _int_array(self.prompt_len, "prompt_len")
        output = _int_array(self.output_len, "output_len")
        try:
            arrival = np.asarray(self.arrival, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise InfercastError(f"must be an array of seconds ({exc})", field="arrival") from None
        n = len(prompt)
        if n == 0:
            raise InfercastError("the workload has no requests (empty trace?)", field="workload")
        if len(output) != n or len(arrival) != n:
            raise InfercastError(
                f"arrays differ in length: arrival {len(arrival)}, prompt_len {n}, output_len {len(output)}",
                field="workload",
            )
        for field_name, arr in (("prompt_len", prompt), ("output_len", output)):
            if (arr < 1).any():
                i = int(np.argmax(arr < 1))
                raise InfercastError(f"must be >= 1; request {i} has {int(arr[i])}", field=field_name)
        bad = ~np.isfinite(arrival) | (arrival < 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise InfercastError(f"must be finite seconds >= 0; request {i} has {float(arrival[i]):g}", field="arrival")
        self.hash_block_size = require_positive_int("hash_block_size", self.hash_block_size)
        if self.closed_loop is not None:
            self.closed_loop = require_positive_int("concurrency", self.closed_loop)
        self.name = str(self.name)
        hashes = self.block_hashes
        if hashes is not None:
            hashes = self._check_hashes(hashes, prompt)
        if n > 1 and (np.diff(arrival) < 0).any():  # documented: out-of-order arrivals are sorted, stably
            order = np.argsort(arrival, kind="stable")
            arrival, prompt, output = arrival[order], prompt[order], output[order]
            if hashes is not None:
                hashes = [hashes[i] for i in order.tolist()]
        self.arrival, self.prompt_len, self.output_len, self.block_hashes = arrival, prompt, output, hashes

    def _check_hashes(self, hashes: Any, prompt: np.ndarray) -> list[np.ndarray]:
        n = len(prompt)
        try:
            hashes = list(hashes)
        except TypeError:
            raise InfercastError(
                "must be a list of integer arrays (one per request) or None", field="block_hashes"
            ) from None
        if len(hashes) != n:
            raise InfercastError(f"has {len(hashes)} entries for {n} requests", field="block_hashes")
        # the common case, checked without a Python-level loop (this runs on every head/tile/_replace):
        # every entry is already a 1-D int64 array
        normal = (
            set(map(type, hashes)) == {np.ndarray}
            and set(map(_DTYPE, hashes)) == {_INT64}
            and set(map(_NDIM, hashes)) == {1}
        )
        if not normal:
            for i, h in enumerate(hashes):
                if not (type(h) is np.ndarray and h.dtype == _INT64 and h.ndim == 1):
                    hashes[i] = _int_array([] if h is None else h, f"block_hashes[{i}]")
        counts = np.fromiter(map(len, hashes), dtype=np.int64, count=n)
        too_many = counts > -(-prompt // self.hash_block_size)
        if too_many.any():
            i = int(np.argmax(too_many))
            raise InfercastError(
                f"request {i} lists {int(counts[i])} blocks of {self.hash_block_size} tokens "
                f"but its prompt has only {int(prompt[i])} tokens",
                field="block_hashes",
            )
        return hashes

    # ----- basics -----------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.prompt_len)

    def __repr__(self) -> str:
        mode = f"closed_loop={self.closed_loop}" if self.closed_loop else f"span={self.duration:.1f}s"
        hashed = f", hashes/{self.hash_block_size}" if self.block_hashes is not None else ""
        return f"Workload({self.name!r}, {len(self)} requests, {mode}{hashed})"

    @property
    def total_prompt_tokens(self) -> int:
        return int(self.prompt_len.sum())

    @property
    def total_output_tokens(self) -> int:
        return int(self.output_len.sum())

    @property
    def duration(self) -> float:
        """Seconds from the first to the last arrival (0 for closed-loop and offline workloads)."""
        return 0.0 if self.closed_loop else float(self.arrival[-1] - self.arrival[0])

    def _replace(self, **changes: Any) -> Workload:
        fields: dict[str, Any] = {
            "arrival": self.arrival,
            "prompt_len": self.prompt_len,
            "output_len": self.output_len,
            "block_hashes": self.block_hashes,
            "hash_block_size": self.hash_block_size,
            "closed_loop": self.closed_loop,
            "name": self.name,
        }
        fields.update(changes)
        return Workload(**fields)

    def head(self, n: int) -> Workload:
        """The first ``n`` requests (all of them if there are fewer)."""
        n = require_positive_int("n", n)
        hashes = None if self.block_hashes is None else self.block_hashes[:n]
        return self._replace(
            arrival=self.arrival[:n],
            prompt_len=self.prompt_len[:n],
            output_len=self.output_len[:n],
            block_hashes=hashes,
        )

    def tile(self, copies: int) -> Workload:
        """The trace repeated ``copies`` times back to back.

        Copy *c* is shifted by ``c * (span + mean gap)`` where span = last - first arrival and mean gap =
        span / (n - 1), so the seam looks like an ordinary gap. Lengths repeat; block-hash ids are offset per
        copy so copies share nothing (within a copy the sharing pattern is unchanged).
        """
        copies = require_positive_int("copies", copies)
        n = len(self)
        if self.closed_loop:
            arrival = np.zeros(n * copies)
        else:
            span = float(self.arrival[-1] - self.arrival[0])
            period = span + (span / (n - 1) if n > 1 else 0.0)
            arrival = (self.arrival[None, :] + period * np.arange(copies)[:, None]).reshape(-1)
        hashes = None
        if self.block_hashes is not None:
            # requests often share one array object (system prompts): offset each distinct object once
            slot: dict[int, int] = {}
            distinct: list[np.ndarray] = []
            for h in self.block_hashes:
                if slot.setdefault(id(h), len(distinct)) == len(distinct):
                    distinct.append(h)
            which = np.fromiter((slot[id(h)] for h in self.block_hashes), dtype=np.int64, count=n)
            flat, counts = _flatten(distinct)
            if flat.size:
                lo, hi = int(flat.min()), int(flat.max())
                if (copies - 1) * (hi - lo + 1) + abs(hi) >= 2**62:  # would overflow: renumber densely first
                    _, flat = np.unique(flat, return_inverse=True)
                    lo, hi = 0, int(flat.max())
                step = hi - lo + 1
                flat = (flat[None, :] + step * np.arange(copies, dtype=np.int64)[:, None]).reshape(-1)
            pool = np.empty(len(distinct) * copies, dtype=object)
            for i, view in enumerate(_split(flat, np.tile(counts, copies))):
                pool[i] = view
            hashes = pool[(which[None, :] + len(distinct) * np.arange(copies)[:, None]).reshape(-1)].tolist()
        name = f"{self.name} x{copies}" if self.name else ""
        return self._replace(
            arrival=arrival,
            prompt_len=np.tile(self.prompt_len, copies),
            output_len=np.tile(self.output_len, copies),
            block_hashes=hashes,
            name=name,
        )

    def summary(self) -> dict[str, Any]:
        """Counts, arrival rate and length statistics (plain Python numbers)."""
        n = len(self)

        def stats(arr: np.ndarray) -> dict[str, float]:
            p50, p90, p99 = np.percentile(arr, [50, 90, 99])
            return {
                "mean": float(arr.mean()),
                "p50": float(p50),
                "p90": float(p90),
                "p99": float(p99),
                "max": int(arr.max()),
            }

        span = self.duration
        out: dict[str, Any] = {
            "name": self.name,
            "num_requests": n,
            "closed_loop": self.closed_loop,
            "duration_s": span,
            "rate_rps": (n - 1) / span if span > 0 else None,  # None: closed loop or all at once
            "total_prompt_tokens": self.total_prompt_tokens,
            "total_output_tokens": self.total_output_tokens,
            "prompt_len": stats(self.prompt_len),
            "output_len": stats(self.output_len),
        }
        if self.block_hashes is not None:
            counts = np.fromiter((len(h) for h in self.block_hashes), dtype=np.int64, count=n)
            out["hash_block_size"] = self.hash_block_size
            out["hashed_blocks_mean"] = float(counts.mean())
            out["requests_with_hashes"] = int((counts > 0).sum())
        return out

    # ----- pandas -----------------------------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """One row per request: ``arrival, prompt_len, output_len`` (+ ``block_hashes``); settings in ``attrs``."""
        df = pd.DataFrame({"arrival": self.arrival, "prompt_len": self.prompt_len, "output_len": self.output_len})
        if self.block_hashes is not None:
            df["block_hashes"] = pd.Series(self.block_hashes, dtype=object)
        df.attrs.update(name=self.name, hash_block_size=self.hash_block_size, closed_loop=self.closed_loop)
        return df

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        *,
        name: str | None = None,
        hash_block_size: int | None = None,
        closed_loop: int | None = None,
    ) -> Workload:
        """Inverse of :meth:`to_frame`. Also accepts the trace column names (``arrived_at``, ``input_length``...).

        Settings not given come from ``df.attrs`` (as written by :meth:`to_frame`), else the defaults.
        """
        if not isinstance(df, pd.DataFrame):
            raise InfercastError(f"expected a pandas DataFrame, got {type(df).__name__}", field="frame")
        cols = {c: _pick_column(df, c_aliases) for c, c_aliases in _FRAME_COLS.items()}
        for key in ("prompt_len", "output_len"):
            if cols[key] is None:
                raise InfercastError(
                    f"missing column {key!r} (or one of {', '.join(_FRAME_COLS[key][1:])}); has {list(df.columns)}",
                    field="frame",
                )
        attrs = df.attrs
        loop = closed_loop if closed_loop is not None else attrs.get("closed_loop")
        arrival = df[cols["arrival"]].to_numpy(np.float64) if cols["arrival"] else np.zeros(len(df))
        if cols["arrival"] is None and loop is None:
            raise InfercastError(f"missing column 'arrival' (has {list(df.columns)})", field="frame")
        hashes = None
        if cols["block_hashes"] is not None:
            hashes = [np.asarray([] if h is None else h, dtype=np.int64) for h in df[cols["block_hashes"]]]
        return cls(
            arrival=arrival,
            prompt_len=_int_array(df[cols["prompt_len"]].to_numpy(), "prompt_len"),
            output_len=_int_array(df[cols["output_len"]].to_numpy(), "output_len"),
            block_hashes=hashes,
            hash_block_size=hash_block_size or attrs.get("hash_block_size") or DEFAULT_HASH_BLOCK_SIZE,
            closed_loop=loop,
            name=name if name is not None else attrs.get("name", ""),
        )


_FRAME_COLS = {
    "arrival": _ARRIVAL_COLS,
    "prompt_len": _PROMPT_COLS,
    "output_len": _OUTPUT_COLS,
    "block_hashes": _HASH_COLS,
}


def _pick_column(df: pd.DataFrame, aliases: tuple[str, ...]) -> str | None:
    return next((c for c in aliases if c in df.columns), None)


def from_frame(df: pd.DataFrame, **kwargs: Any) -> Workload:
    """Module-level alias of :meth:`Workload.from_frame`."""
    return Workload.from_frame(df, **kwargs)
