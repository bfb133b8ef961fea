"""Measurement records: one measured figure per CSV row, the common currency of measure/calibrate/validate.

A record says what was run (model, GPU, formats, parallelism, the shape of the work) and what was measured
(``value`` in ``unit``). Published figures and our own GPU runs use the same columns, so one calibration
fit and one validation report serve both.

Kinds and the fields they use:

=====================  ======================================================  ===========
kind                   work described by                                       unit
=====================  ======================================================  ===========
prefill_step           ``batch`` chunks of ``input_len`` tokens on ``context``  s
                       cached tokens each (one forward pass)
decode_step            ``batch`` decode tokens, each at ``context`` (one step)  s
ttft                   one request (``batch`` requests) of ``input_len`` tokens s
tpot                   mean decode step of a static batch (input/output/batch)  s
static_throughput      output tok/s of a static batch (input/output/batch)      tok/s
gemm                   one GEMM of ``m`` x ``k`` @ ``k`` x ``n`` in ``precision``   s
op                     one named layer operator (``op``) for ``batch`` tokens   s
hbm_copy               device-to-device copy of ``bytes`` (read + write)        s
launch_overhead        one empty kernel launch                                  s
serving_ttft           mean TTFT of ``batch`` requests sent at once (serving)   s
serving_tpot           median TPOT of ``batch`` requests sent at once           s
=====================  ======================================================  ===========

Serving kinds include queueing and scheduling, so they are predicted by the simulator.

``layers`` (optional) says the run used only the first N decoder layers of the model; predictions for
that row use the same truncated model.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from infercast.errors import InfercastError

KINDS = (
    "prefill_step",
    "decode_step",
    "ttft",
    "tpot",
    "static_throughput",
    "gemm",
    "op",
    "hbm_copy",
    "launch_overhead",
    "serving_ttft",
    "serving_tpot",
)
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "tok/s": 1.0}


@dataclass
class Record:
    """One measured figure (see module docstring for kinds)."""

    kind: str
    model: str = ""
    gpu: str = ""
    engine: str = "torch"
    precision: str = "bf16"
    kv_precision: str = ""
    tp: int = 1
    ep: int = 1
    batch: int = 1
    input_len: int = 0
    output_len: int = 0
    context: int = 0
    layers: int = 0
    m: int = 0
    n: int = 0
    k: int = 0
    bytes: float = 0.0
    op: str = ""
    value: float = math.nan
    unit: str = "s"
    source: str = ""
    gpu_name: str = ""
    driver: str = ""
    torch_version: str = ""
    clocks: str = ""
    timestamp: str = ""
    notes: str = ""

    @property
    def value_si(self) -> float:
        """The value in seconds (times) or tokens/s (throughputs)."""
        return self.value * UNITS[self.unit]


FIELDS = [f.name for f in fields(Record)]
_INT_FIELDS = {f.name for f in fields(Record) if f.type == "int"}
_FLOAT_FIELDS = {f.name for f in fields(Record) if f.type == "float"}


def read_records(path: str | Path) -> list[Record]:
    """Read a measurement CSV (extra columns ignored, missing ones defaulted); errors name the row and field."""
    path = Path(path)
    try:
        handle = path.open(newline="")
    except FileNotFoundError:
        raise InfercastError(f"no such file: {path}", field="data") from None
    out = []
    with handle:
        reader = csv.DictReader(line for line in handle if not line.lstrip().startswith("#"))
        if not reader.fieldnames or "kind" not in reader.fieldnames or "value" not in reader.fieldnames:
            raise InfercastError(f"{path} needs at least the columns 'kind' and 'value'", field="data")
        for i, row in enumerate(reader, start=2):
            kwargs: dict[str, object] = {}
            for name in FIELDS:
                raw = row.get(name)
                if raw is None or raw == "":
                    continue
                try:
                    if name in _INT_FIELDS:
                        kwargs[name] = int(float(raw))
                    elif name in _FLOAT_FIELDS:
                        kwargs[name] = float(raw)
                    else:
                        kwargs[name] = raw
                except ValueError:
                    raise InfercastError(f"{path}:{i}: {name}={raw!r} is not a number", field="data") from None
            rec = Record(**kwargs)  # type: ignore[arg-type]
            if rec.kind not in KINDS:
                raise InfercastError(
                    f"{path}:{i}: unknown kind {rec.kind!r}; allowed: {', '.join(KINDS)}", field="data"
                )
            if rec.unit not in UNITS:
                raise InfercastError(
                    f"{path}:{i}: unknown unit {rec.unit!r}; allowed: {', '.join(UNITS)}", field="data"
                )
            if not (rec.value > 0):
                raise InfercastError(f"{path}:{i}: value must be > 0, got {rec.value}", field="data")
            out.append(rec)
    if not out:
        raise InfercastError(f"{path} holds no measurements", field="data")
    return out


def write_records(path: str | Path, records: list[Record], header_comment: str = "") -> None:
    """Write records as CSV; ``header_comment`` lines (e.g. the command that produced them) start with '#'."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        for line in header_comment.splitlines():
            handle.write(f"# {line}\n")
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        for rec in records:
            writer.writerow(asdict(rec))
