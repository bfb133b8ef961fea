"""Token-length distributions: :class:`LengthSpec` and :func:`lengths`."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from infercast.errors import InfercastError, require_positive_int, unknown_choice
from infercast.files import is_file
from infercast.sim.workload.core import RngLike, _int_array, _numeric_column, _read_csv, _rng

DISTRIBUTIONS = ("fixed", "uniform", "normal", "lognormal", "empirical")
_LEN_CAP = 1 << 40  # sampled lengths are clipped here when no max is given (keeps int64 conversion sane)
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
    if not is_file(p):
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


BENCHMARK_RANGE_RATIO = 0.8
"""Lengths of published closed-loop sweeps: uniform in [0.8 L, L] (``--random-range-ratio 0.8`` of the
benchmark clients aiconfigurator's silicon samples were measured with; /work/shared/reference/README.md)."""


def length_range(top: int, ratio: float = BENCHMARK_RANGE_RATIO) -> LengthSpec:
    """Integers uniform in [ceil(ratio * top), top]: a benchmark client's ``--random-range-ratio`` lengths."""
    top = require_positive_int("length", top)
    if not 0 < ratio <= 1:
        raise InfercastError(f"must be in (0, 1], got {ratio!r}", field="range_ratio")
    low = max(1, math.ceil(ratio * top - 1e-9))
    return LengthSpec("uniform", (float(low), float(top)))
