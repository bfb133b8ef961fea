"""Workloads for the serving simulator: who arrives when, with how many prompt and output tokens.

A :class:`Workload` is a handful of NumPy arrays (one entry per request), so a million requests cost a few
megabytes and build in a fraction of a second. Builders:

* :func:`synthetic` — lengths from :func:`lengths` distributions, arrivals from :func:`arrivals`
  (Poisson / gamma-bursty / constant / offline), or a closed loop of ``concurrency`` clients;
* :func:`load_trace_csv`, :func:`load_mooncake_jsonl`, :func:`load_trace`, :func:`builtin_trace` — replay of
  real traces (Azure LLM inference 2023, Mooncake/FAST'25);
* :func:`with_system_prompts`, :func:`multi_turn` — shared prompt prefixes, expressed as block-hash ids.

Block hashes. ``block_hashes[i]`` lists ids of the consecutive ``hash_block_size``-token blocks at the start
of request *i*'s prompt (the last one may be a partial block, as in Mooncake traces; consumers count only
full blocks). Two requests share a cached prefix of *b* blocks iff their first *b* ids are equal. Every
builder here also keeps ids *prefix-closed*: an id at position *j* determines the whole prefix before it
(like vLLM's chained block hashes), so a cache keyed by the id alone is correct. The id arrays may be
read-only views into a shared buffer; copy before mutating.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.errors import (
    InfercastError,
    require_fraction,
    require_positive_int,
    require_positive_number,
    unknown_choice,
)

__all__ = [
    "ARRIVAL_KINDS",
    "BUILTIN_TRACES",
    "DISTRIBUTIONS",
    "MOONCAKE_BLOCK_SIZE",
    "LengthSpec",
    "Workload",
    "arrivals",
    "builtin_trace",
    "from_frame",
    "lengths",
    "load_mooncake_jsonl",
    "load_trace",
    "load_trace_csv",
    "multi_turn",
    "synthetic",
    "with_system_prompts",
]

DISTRIBUTIONS = ("fixed", "uniform", "normal", "lognormal", "empirical")
ARRIVAL_KINDS = ("poisson", "gamma", "constant", "offline")
BUILTIN_TRACES = {"azure_conv": "azure_conv_2023.csv", "azure_code": "azure_code_2023.csv"}
MOONCAKE_BLOCK_SIZE = 512  # tokens per hash id in the Mooncake / FAST'25 traces
TRACE_SUFFIXES = (".csv", ".jsonl", ".json")
_LEN_CAP = 1 << 40  # sampled lengths are clipped here when no max is given (keeps int64 conversion sane)

RngLike = np.random.Generator | int | None

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
    counts = np.fromiter((len(h) for h in hashes), dtype=np.int64, count=len(hashes))
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
    hash_block_size: int = 16
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
        for i, h in enumerate(hashes):
            if type(h) is np.ndarray and h.dtype == np.int64 and h.ndim == 1:
                continue
            hashes[i] = _int_array([] if h is None else h, f"block_hashes[{i}]")
        counts = np.fromiter((len(h) for h in hashes), dtype=np.int64, count=n)
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
        fields = {
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
            hash_block_size=hash_block_size or attrs.get("hash_block_size") or 16,
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


# ----------------------------------------------------------------------------------------------------------
# Length distributions
# ----------------------------------------------------------------------------------------------------------
_ARITY = {"fixed": 1, "uniform": 2, "normal": 2, "lognormal": 2}
_MAX_RE = re.compile(r"\s*[,;]\s*max\s*=\s*([^,;]+)\s*$")


@dataclass(frozen=True)
class LengthSpec:
    """A token-length distribution. Samples are integers >= 1, clipped to ``max`` when given.

    String forms (:meth:`parse`), each optionally followed by ``,max=N``:

    * ``"512"`` or ``"fixed:512"``;
    * ``"uniform:100,1024"`` — integers uniform on [100, 1024], both inclusive;
    * ``"normal:mean,std"`` — rounded to the nearest integer; values below 1 are clamped to 1 (not resampled);
    * ``"lognormal:median,sigma"`` — ``median * exp(sigma * Z)``, Z standard normal (so ``median`` = exp(mu) and
      ``sigma`` is the standard deviation of the log; the mean is ``median * exp(sigma**2 / 2)``), rounded,
      clamped to >= 1;
    * ``"empirical:path.csv:column"`` — sampled with replacement from a CSV column (values must be >= 1); the
      column may be omitted when the file has a single column.
    """

    kind: str
    params: tuple[float, ...] = ()
    path: str | None = None
    column: str | None = None
    max: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in DISTRIBUTIONS:
            raise unknown_choice("distribution", self.kind, DISTRIBUTIONS)
        if self.max is not None:
            object.__setattr__(self, "max", require_positive_int("max", self.max))
        if self.kind == "empirical":
            if not self.path:
                raise InfercastError("empirical needs a CSV path: 'empirical:path.csv:column'", field="distribution")
            return
        params = tuple(float(p) for p in self.params)
        object.__setattr__(self, "params", params)
        if len(params) != _ARITY[self.kind]:
            raise InfercastError(
                f"{self.kind} takes {_ARITY[self.kind]} number(s), got {len(params)}: {self}", field="distribution"
            )
        if any(not math.isfinite(p) for p in params):
            raise InfercastError(f"parameters must be finite numbers: {self}", field="distribution")
        a = params[0]
        if self.kind == "fixed" and (a < 1 or a != round(a)):
            raise InfercastError(f"fixed length must be an integer >= 1, got {a:g}", field="distribution")
        if self.kind == "uniform":
            b = params[1]
            if a < 1 or b < a or a != round(a) or b != round(b):
                raise InfercastError(f"uniform needs integers 1 <= low <= high, got {a:g},{b:g}", field="distribution")
        if self.kind == "normal" and (a <= 0 or params[1] < 0):
            raise InfercastError(f"normal needs mean > 0 and std >= 0, got {a:g},{params[1]:g}", field="distribution")
        if self.kind == "lognormal" and (a <= 0 or params[1] < 0):
            raise InfercastError(
                f"lognormal needs median > 0 and sigma >= 0, got {a:g},{params[1]:g}", field="distribution"
            )

    def __str__(self) -> str:
        tail = f",max={self.max}" if self.max is not None else ""
        if self.kind == "empirical":
            return f"empirical:{self.path}" + (f":{self.column}" if self.column else "") + tail
        return f"{self.kind}:" + ",".join(f"{p:g}" for p in self.params) + tail

    @classmethod
    def parse(cls, spec: str | int | LengthSpec, *, field: str = "distribution") -> LengthSpec:
        """Parse ``"kind:params"`` (see the class docstring); ints mean fixed lengths."""
        if isinstance(spec, LengthSpec):
            return spec
        if isinstance(spec, bool):
            raise InfercastError(f"expected a length or a distribution string, got {spec!r}", field=field)
        if isinstance(spec, int | np.integer):
            return cls("fixed", (require_positive_int(field, int(spec)),))
        if isinstance(spec, float):
            return cls("fixed", (require_positive_int(field, spec),))
        if not isinstance(spec, str) or not spec.strip():
            raise InfercastError(f"expected a length or a distribution string, got {spec!r}", field=field)
        text = spec.strip()
        max_len: int | None = None
        m = _MAX_RE.search(text)
        if m:
            max_len = require_positive_int("max", m.group(1).strip())
            text = text[: m.start()]
        kind, sep, rest = text.partition(":")
        kind = kind.strip().lower()
        if not sep:
            if re.fullmatch(r"\d+", kind):
                return cls("fixed", (float(kind),), max=max_len)
            raise unknown_choice(field, kind, DISTRIBUTIONS)
        if kind not in DISTRIBUTIONS:
            raise unknown_choice(field, kind, DISTRIBUTIONS)
        if kind == "empirical":
            path, column = rest, None
            head, colon, tail = rest.rpartition(":")
            # "C:\\x.csv" has a colon too: only split when what follows looks like a column name, not a path
            if colon and head and "/" not in tail and "\\" not in tail and not tail.lower().endswith(".csv"):
                path, column = head, tail.strip() or None
            return cls("empirical", path=path.strip(), column=column, max=max_len)
        try:
            params = tuple(float(p) for p in rest.split(","))
        except ValueError:
            raise InfercastError(
                f"cannot read numbers in {spec!r} (expected e.g. 'uniform:100,1024')", field=field
            ) from None
        try:
            return cls(kind, params, max=max_len)
        except InfercastError as exc:  # report under the caller's field (e.g. input_len)
            text = str(exc).removeprefix(f"{exc.field}: ") if exc.field else str(exc)
            raise InfercastError(text, field=field, allowed=exc.allowed) from None

    def sample(self, n: int, rng: RngLike = None) -> np.ndarray:
        """``n`` int64 lengths >= 1."""
        n = require_positive_int("num_requests", n)
        gen = _rng(rng)
        p = self.params
        if self.kind == "fixed":
            values = np.full(n, p[0])
        elif self.kind == "uniform":
            values = gen.integers(int(p[0]), int(p[1]), size=n, endpoint=True)
        elif self.kind == "normal":
            values = np.rint(gen.normal(p[0], p[1], size=n))
        elif self.kind == "lognormal":
            values = np.rint(p[0] * np.exp(p[1] * gen.standard_normal(n)))
        else:
            pool = _empirical_column(str(self.path), self.column)
            values = pool[gen.integers(0, len(pool), size=n)]
        top = self.max if self.max is not None else _LEN_CAP
        return np.clip(values, 1, top).astype(np.int64)


LengthLike = str | int | LengthSpec | np.ndarray | list[int]


def lengths(
    dist: LengthLike, n: int, rng: RngLike = None, *, max: int | None = None, field: str = "length"
) -> np.ndarray:
    """Sample ``n`` integer token lengths >= 1 from a distribution spec (see :class:`LengthSpec`).

    An array (or list) of exactly ``n`` lengths is taken as is (validated, clipped to ``max``), so trace
    lengths can be re-timed with :func:`synthetic`.
    """
    if isinstance(dist, np.ndarray | list | tuple | pd.Series):
        n = require_positive_int("num_requests", n)
        values = _int_array(dist, field)
        if len(values) != n:
            raise InfercastError(f"has {len(values)} lengths for {n} requests", field=field)
        if (values < 1).any():
            i = int(np.argmax(values < 1))
            raise InfercastError(f"lengths must be >= 1; entry {i} is {int(values[i])}", field=field)
        top = require_positive_int("max", max) if max is not None else None
        return values.copy() if top is None else np.minimum(values, top)
    spec = LengthSpec.parse(dist, field=field)
    if max is not None:
        max = require_positive_int("max", max)
        spec = LengthSpec(spec.kind, spec.params, spec.path, spec.column, min(max, spec.max or max))
    return spec.sample(n, rng)


_EMPIRICAL_CACHE: dict[tuple[str, str | None, float], np.ndarray] = {}


def _empirical_column(path: str, column: str | None) -> np.ndarray:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InfercastError(f"file not found: {p}", field="distribution")
    key = (str(p.resolve()), column, p.stat().st_mtime)
    if key in _EMPIRICAL_CACHE:
        return _EMPIRICAL_CACHE[key]
    df = _read_csv(p)
    if column is None:
        if df.shape[1] != 1:
            raise InfercastError(
                f"{p} has columns {list(df.columns)}; name one: 'empirical:{p}:COLUMN'", field="distribution"
            )
        column = str(df.columns[0])
    if column not in df.columns:
        raise InfercastError(f"{p} has no column {column!r} (has {list(df.columns)})", field="distribution")
    values = _numeric_column(df, column, p)
    bad = (values < 1) | (values != np.round(values))
    if bad.any():
        i = int(np.argmax(bad))
        raise InfercastError(
            f"{p}, line {i + 2}: {column} = {float(values[i]):g}, lengths must be integers >= 1", field="distribution"
        )
    arr = values.astype(np.int64)
    _EMPIRICAL_CACHE[key] = arr
    return arr


# ----------------------------------------------------------------------------------------------------------
# Arrival processes
# ----------------------------------------------------------------------------------------------------------
def arrivals(
    kind: str,
    n: int,
    rate: float | None = None,
    burstiness: float = 1.0,
    rng: RngLike = None,
    *,
    normalize: bool = True,
) -> np.ndarray:
    """``n`` non-decreasing arrival times (seconds) at mean ``rate`` requests/s.

    Matches ``vllm bench serve`` (``get_request`` in vllm/benchmarks/serve.py, vllm-project/vllm):

    * inter-arrival gaps are ``Gamma(shape=burstiness, scale=1 / (rate * burstiness))`` — mean ``1/rate``,
      coefficient of variation ``1/sqrt(burstiness)``; burstiness 1 is exponential (Poisson process), < 1 is
      burstier, > 1 smoother. ``poisson`` is the same draw with shape 1, so like vLLM, ``poisson`` with
      burstiness != 1 *is* the gamma process;
    * one gap is drawn per request and the times are their cumulative sum, so the first request arrives
      after one gap, not at t=0 (vLLM waits ``delay_ts[0]`` before the first send; the older
      ``benchmarks/benchmark_serving.py`` sent the first one at once and slept a gap after each send —
      subtract ``t[0]`` for that);
    * ``normalize=True`` then rescales the times so the last one is exactly ``n / rate``, as vLLM does
      without a ramp-up (it keeps throughput comparable across seeds). ``normalize=False`` gives the raw
      renewal process;
    * ``constant``: gaps exactly ``1/rate`` (vLLM's burstiness = inf), times ``1/rate, 2/rate, ...``;
    * ``offline`` (or ``rate=inf``, vLLM's default): everything at t=0.

    vLLM draws from NumPy's global legacy RNG; here ``rng`` is a ``numpy.random.Generator`` (or a seed), so
    the distribution matches but not the exact numbers.
    """
    if not isinstance(kind, str) or kind.lower() not in ARRIVAL_KINDS:
        raise unknown_choice("arrival", str(kind), ARRIVAL_KINDS)
    kind = kind.lower()
    n = require_positive_int("num_requests", n)
    b = require_positive_number("burstiness", burstiness, allow_inf=True)
    if kind == "offline":
        return np.zeros(n)
    if rate is None:
        raise InfercastError(
            f"required for arrival={kind!r} (requests/s); use arrival='offline' or concurrency=N otherwise",
            field="rate",
        )
    r = require_positive_number("rate", rate, allow_inf=True)
    if math.isinf(r):
        return np.zeros(n)
    if kind == "constant" or math.isinf(b):
        return np.arange(1, n + 1, dtype=np.float64) / r
    # Source: vllm-project/vllm, vllm/benchmarks/serve.py get_request() (read at commit def9ce85ba10;
    # the legacy benchmarks/benchmark_serving.py at 0049e29c41fd draws the same gamma interval but yields the
    # first request before sleeping, and does not rescale): theta = 1.0 / (request_rate * burstiness);
    # delay_ts.append(np.random.gamma(shape=burstiness, scale=theta)); cumulative sum; then
    # delay_ts *= (total_requests / request_rate) / delay_ts[-1]  (when no ramp-up strategy is set).
    gaps = _rng(rng).gamma(shape=b, scale=1.0 / (r * b), size=n)
    times = np.cumsum(gaps)
    if normalize and times[-1] > 0:
        times *= (n / r) / times[-1]
    return times


# ----------------------------------------------------------------------------------------------------------
# Synthetic workloads
# ----------------------------------------------------------------------------------------------------------
PrefixSpec = int | tuple[int, int] | tuple[int, int, float] | dict[str, Any]


def synthetic(
    num_requests: int,
    input_len: LengthLike,
    output_len: LengthLike,
    arrival: str = "poisson",
    rate: float | None = None,
    burstiness: float = 1.0,
    concurrency: int | None = None,
    seed: int = 0,
    prefix: PrefixSpec | None = None,
    *,
    hash_block_size: int = 16,
    name: str = "",
) -> Workload:
    """A synthetic workload.

    ``input_len`` / ``output_len``: ints, distribution specs (:class:`LengthSpec`) or arrays of
    ``num_requests`` exact lengths (e.g. a trace's, to re-time it). Open loop: ``arrival``
    and ``rate`` (see :func:`arrivals`). Closed loop: ``concurrency=N`` clients each sending the next request
    when the previous one finishes (no ``rate``; arrivals are zeros). ``prefix``: shared system prompts added
    in front of the prompts (lengths grow, like vLLM's ``--random-prefix-len``): ``P`` tokens shared by all,
    ``(num_prompts, P)`` or ``(num_prompts, P, fraction)``, or a dict of :func:`with_system_prompts` keywords.
    The input lengths, output lengths, arrivals and prefixes use independent random streams of ``seed``.
    """
    n = require_positive_int("num_requests", num_requests)
    if not isinstance(arrival, str) or arrival.lower() not in ARRIVAL_KINDS:
        raise unknown_choice("arrival", str(arrival), ARRIVAL_KINDS)
    arrival = arrival.lower()
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)]
    prompt = lengths(input_len, n, streams[0], field="input_len")
    output = lengths(output_len, n, streams[1], field="output_len")
    if concurrency is not None:
        concurrency = require_positive_int("concurrency", concurrency)
        if rate is not None and arrival != "offline":
            raise InfercastError("give either rate (open loop) or concurrency (closed loop), not both", field="rate")
        require_positive_number("burstiness", burstiness, allow_inf=True)
        times = np.zeros(n)
    else:
        times = arrivals(arrival, n, rate=rate, burstiness=burstiness, rng=streams[2])
    if not name:
        process = arrival
        if arrival in ("poisson", "gamma") and burstiness != 1:
            process = f"gamma(burstiness={burstiness:g})"
        load = f"concurrency={concurrency}" if concurrency else (process if rate is None else f"{process}@{rate:g}/s")
        described = [
            f"{len(x)} given" if not isinstance(x, str | int | LengthSpec) else x for x in (input_len, output_len)
        ]
        name = f"synthetic(in={described[0]}, out={described[1]}, {load})"
    work = Workload(times, prompt, output, None, hash_block_size, concurrency, name)
    if prefix is not None:
        work = _apply_prefix(work, prefix, streams[3])
    return work


def _apply_prefix(work: Workload, prefix: PrefixSpec, rng: np.random.Generator) -> Workload:
    if isinstance(prefix, dict):
        kwargs = dict(prefix)
    elif isinstance(prefix, tuple | list):
        if len(prefix) not in (2, 3):
            raise InfercastError(
                f"expected tokens, (num_prompts, tokens) or (num_prompts, tokens, fraction), got {prefix!r}",
                field="prefix",
            )
        kwargs = dict(zip(("num_prompts", "prompt_tokens", "fraction"), prefix, strict=False))
    else:
        kwargs = {"num_prompts": 1, "prompt_tokens": prefix}
    kwargs.setdefault("num_prompts", 1)
    if "prompt_tokens" not in kwargs:
        raise InfercastError("needs prompt_tokens", field="prefix")
    kwargs.setdefault("seed", rng)
    try:
        return with_system_prompts(work, **kwargs)
    except TypeError as exc:
        raise InfercastError(f"bad prefix options {prefix!r} ({exc})", field="prefix") from None


# ----------------------------------------------------------------------------------------------------------
# Trace replay
# ----------------------------------------------------------------------------------------------------------
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
            f"{path}, line {i + 2}: column {column!r} has {df[column].iloc[i]!r}, expected a number", field="path"
        )
    return values


def _check_path(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InfercastError(f"file not found: {p}", field="path")
    return p


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
        ("arrival time", times, ~np.isfinite(times) | (times < 0), "finite and >= 0"),
        ("prompt length", prompt, (prompt < 1) | (prompt != np.round(prompt)), "an integer >= 1"),
        ("output length", output, (output < 1) | (output != np.round(output)), "an integer >= 1"),
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
        hash_block_size=16,
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
    try:
        handle = p.open(encoding="utf-8")
    except OSError as exc:
        raise InfercastError(f"cannot read {p} ({exc.strerror})", field="path") from None
    with handle:
        for lineno, raw in enumerate(handle, 1):
            line = raw.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InfercastError(f"{p}, line {lineno}: not valid JSON ({exc.msg})", field="path") from None
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
                not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids)
            ):
                raise InfercastError(f"{p}, line {lineno}: hash_ids must be a list of integers", field="path")
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


def builtin_trace(name: str, **kwargs: Any) -> Workload:
    """A trace shipped with infercast: ``"azure_conv"`` or ``"azure_code"`` (Azure LLM inference 2023).

    Keywords go to :func:`load_trace_csv` (``time_scale``, ``max_requests``).
    """
    key = str(name).lower().removesuffix(".csv").removesuffix("_2023")
    if key not in BUILTIN_TRACES:
        raise unknown_choice("trace", str(name), BUILTIN_TRACES)
    ref = resources.files("infercast").joinpath("data", "traces", BUILTIN_TRACES[key])
    kwargs.setdefault("name", key)
    with resources.as_file(ref) as p:
        return load_trace_csv(p, **kwargs)


# ----------------------------------------------------------------------------------------------------------
# Shared prefixes
# ----------------------------------------------------------------------------------------------------------
def with_system_prompts(
    workload: Workload,
    num_prompts: int,
    prompt_tokens: int,
    fraction: float = 1.0,
    seed: RngLike = 0,
    *,
    hash_block_size: int | None = None,
) -> Workload:
    """Prepend one of ``num_prompts`` shared system prompts of ``prompt_tokens`` tokens to a share of requests.

    Exactly ``round(fraction * n)`` requests (chosen at random) get a prompt chosen uniformly among the K;
    their ``prompt_len`` grows by ``prompt_tokens``. Prompt *k*'s ``prompt_tokens // B`` full blocks get ids
    shared by all its users (B = the hash block size; a partial tail block is not shareable, as in vLLM).
    Block hashes the workload already had are renumbered for the shifted requests so ids stay prefix-closed.
    ``hash_block_size`` may only be chosen when the workload has no block hashes yet.
    """
    k_count = require_positive_int("num_prompts", num_prompts)
    s_tokens = require_positive_int("prompt_tokens", prompt_tokens)
    frac = require_fraction("fraction", fraction)
    old = workload.block_hashes
    block = workload.hash_block_size
    if hash_block_size is not None:
        hash_block_size = require_positive_int("hash_block_size", hash_block_size)
        if old is not None and hash_block_size != block:
            raise InfercastError(
                f"the workload already has {block}-token block hashes; cannot switch to {hash_block_size}",
                field="hash_block_size",
            )
        block = hash_block_size
    gen = _rng(seed)
    n = len(workload)
    chosen = np.zeros(n, dtype=bool)
    chosen[gen.permutation(n)[: round(frac * n)]] = True
    which = gen.integers(0, k_count, size=n)
    m = s_tokens // block
    prompt = workload.prompt_len + s_tokens * chosen
    if old is None:
        if m == 0:
            hashes = None
        else:  # all users of prompt k share one read-only array: O(K*m) memory however many requests
            table = np.arange(k_count * m, dtype=np.int64).reshape(k_count, m)
            table.flags.writeable = False
            pool = np.empty(k_count + 1, dtype=object)
            for k in range(k_count):  # (a slice assignment would broadcast the rows into a 2-D block)
                pool[k] = table[k]
            pool[k_count] = np.zeros(0, np.int64)
            hashes = pool[np.where(chosen, which, k_count)].tolist()
    else:
        hashes = _prepend_hashes(old, chosen, which, k_count, m)
    return workload._replace(prompt_len=prompt, block_hashes=hashes, hash_block_size=block)


def _prepend_hashes(
    old: list[np.ndarray], chosen: np.ndarray, which: np.ndarray, k_count: int, m: int
) -> list[np.ndarray]:
    """Put system-prompt ids in front of existing ids, renumbering the shifted ones per (prompt, old id)."""
    flat, counts = _flatten(old)
    base = int(flat.max()) + 1 if flat.size else 0
    owner = np.repeat(np.arange(len(old)), counts)
    moved = chosen[owner]
    mapped = flat.copy()
    if moved.any():
        # a shifted block's content depends on the system prompt and on the old block: one fresh id per pair
        _, dense = np.unique(flat[moved], return_inverse=True)
        pair = which[owner[moved]].astype(np.int64) * (int(dense.max()) + 1) + dense
        _, fresh = np.unique(pair, return_inverse=True)
        mapped[moved] = base + k_count * m + fresh
    new_counts = counts + m * chosen
    total = int(new_counts.sum())
    req = np.repeat(np.arange(len(old)), new_counts)
    pos = np.arange(total) - np.repeat(np.cumsum(new_counts) - new_counts, new_counts)
    shift = m * chosen[req]
    is_sys = pos < shift
    src = np.repeat(np.cumsum(counts) - counts, new_counts) + pos - shift
    out = np.where(is_sys, base + which[req] * m + pos, mapped[np.where(is_sys, 0, src)] if flat.size else 0)
    return _split(out.astype(np.int64), new_counts)


def multi_turn(
    num_sessions: int,
    turns: str | int | LengthSpec,
    input_len: str | int | LengthSpec,
    output_len: str | int | LengthSpec,
    *,
    session_rate: float | None = None,
    session_arrival: str = "poisson",
    burstiness: float = 1.0,
    think_time: float = 5.0,
    system_prompt_tokens: int = 0,
    num_system_prompts: int = 1,
    max_context: int | None = None,
    hash_block_size: int = 16,
    seed: int = 0,
    name: str = "",
) -> Workload:
    """Multi-turn conversations whose turns share their growing context as a cached prefix.

    Session starts follow ``session_arrival`` at ``session_rate`` sessions/s (all at t=0 when
    ``session_rate`` is None). Each session has ``turns`` turns (an int or a distribution). Turn *t*'s prompt is
    the system prompt (``system_prompt_tokens``, one of ``num_system_prompts``; 0 = none) + every earlier turn's
    user tokens and output + ``input_len`` new user tokens; it produces ``output_len`` tokens. Turn *t+1*
    arrives an exponential think time (mean ``think_time`` s) after turn *t* *arrives* — an open-loop
    approximation: the simulator does not wait for turn *t*'s answer. A session ends before the first turn
    whose prompt + output would exceed ``max_context``. Requests of all sessions are interleaved by arrival.
    Hash ids number each session's context blocks, so consecutive turns share the earlier turn's full blocks
    (and sessions with the same system prompt share its full blocks).
    """
    s_count = require_positive_int("num_sessions", num_sessions)
    block = require_positive_int("hash_block_size", hash_block_size)
    think = require_positive_number("think_time", think_time, allow_zero=True)
    sys_tokens = 0 if system_prompt_tokens == 0 else require_positive_int("system_prompt_tokens", system_prompt_tokens)
    k_count = require_positive_int("num_system_prompts", num_system_prompts)
    if max_context is not None:
        max_context = require_positive_int("max_context", max_context)
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(6)]
    per_session = lengths(turns, s_count, streams[0], field="turns")
    starts = (
        arrivals(session_arrival, s_count, rate=session_rate, burstiness=burstiness, rng=streams[1])
        if session_rate is not None
        else np.zeros(s_count)
    )
    total = int(per_session.sum())
    sess = np.repeat(np.arange(s_count), per_session)
    first = np.cumsum(per_session) - per_session  # index of each session's first turn
    turn = np.arange(total) - first[sess]
    user = lengths(input_len, total, streams[2], field="input_len")
    out = lengths(output_len, total, streams[3], field="output_len")

    def within(x: np.ndarray) -> np.ndarray:  # cumulative sum restarting at every session
        c = np.cumsum(x)
        return c - (c - x)[first][sess]

    context_before = within(user + out) - (user + out)
    prompt = sys_tokens + context_before + user
    gaps = streams[4].exponential(think, total) if think > 0 else np.zeros(total)
    gaps[turn == 0] = 0.0
    arrival = starts[sess] + within(gaps)
    keep = np.ones(total, dtype=bool)
    if max_context is not None:
        keep = within((prompt + out > max_context).astype(np.int64)) == 0
        if not keep.any():
            raise InfercastError(
                f"even the first turns exceed max_context={max_context}; raise it or shorten the turns",
                field="max_context",
            )
    system = streams[5].integers(0, k_count, size=s_count)
    m = sys_tokens // block
    blocks = prompt // block  # full blocks of each turn's prompt
    # each session's id sequence: its system prompt's m shared ids, then ids unique to the session
    longest = np.zeros(s_count, dtype=np.int64)
    np.maximum.at(longest, sess[keep], blocks[keep])
    longest = np.maximum(longest, m)
    own = longest - m
    own_start = k_count * m + np.cumsum(own) - own
    seq_start = np.cumsum(longest) - longest
    pos = np.arange(int(longest.sum())) - np.repeat(seq_start, longest)
    owner = np.repeat(np.arange(s_count), longest)
    buffer = np.where(pos < m, system[owner] * m + pos, own_start[owner] + pos - m).astype(np.int64)
    buffer.flags.writeable = False
    idx = np.flatnonzero(keep)
    hashes = [buffer[s : s + b] for s, b in zip(seq_start[sess[idx]].tolist(), blocks[idx].tolist(), strict=True)]
    order = np.argsort(arrival[idx], kind="stable")
    if not name:
        name = f"multi_turn({s_count} sessions, turns={turns}, in={input_len}, out={output_len})"
    flat_any = bool(blocks[idx].any())
    return Workload(
        arrival[idx][order],
        prompt[idx][order],
        out[idx][order],
        [hashes[i] for i in order.tolist()] if flat_any else None,
        block,
        None,
        name,
    )
