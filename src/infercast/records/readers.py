"""Reading measurement files into :class:`~infercast.records.record.Record` lists, through one registry of source
formats (:data:`READERS`: name -> a sniff of the file and a reader): infercast's own CSV, aiconfigurator's
closed-loop silicon rows, and the result files of ``vllm bench serve``, GuideLLM and AIPerf. Every error names the
file, the row and the field."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from infercast.errors import InfercastError, nearest, unknown_choice
from infercast.files import check_input_file, is_dir
from infercast.records.bench_results import RunFacts, detect_tool, read_bench_file, records_from_runs
from infercast.records.record import FIELDS, Record, check_record, parse_cell
from infercast.records.silicon_rows import is_closed_loop_table, read_closed_loop_rows

Lines = list[tuple[int, str]]
"""A text file's ``(line number, text)`` lines, comment lines left out."""


@dataclass(frozen=True)
class SourceFile:
    """What a sniff sees of a file: its path, its lines (comments left out) and, for a CSV, its columns."""

    path: Path
    lines: Lines
    columns: tuple[str, ...]


@dataclass(frozen=True)
class RecordReader:
    """One source format: ``sniff`` says whether a file is of it, ``read`` turns the file into records (``facts``:
    what the caller says about benchmark runs whose files do not record it)."""

    what: str
    sniff: Callable[[SourceFile], bool]
    read: Callable[[SourceFile, RunFacts], list[Record]]


def _bench(tool: str) -> RecordReader:
    def sniff(src: SourceFile) -> bool:
        return _tool_of(src) == tool

    def read(src: SourceFile, facts: RunFacts) -> list[Record]:
        return records_from_runs(read_bench_file(src.path, tool), facts)

    return RecordReader(f"{tool} benchmark result file", sniff, read)


def _tool_of(src: SourceFile) -> str | None:
    """The benchmark tool that wrote a JSON (or AIPerf CSV) result file, else None."""
    if src.path.suffix.lower() == ".csv":
        return "aiperf" if "Metric" in src.columns else None
    text = "\n".join(line for _, line in src.lines)
    try:
        docs = [json.loads(text)]
    except json.JSONDecodeError:
        try:
            docs = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError:
            return None
    return detect_tool(docs[0]) if docs and isinstance(docs[0], dict) else None


READERS: dict[str, RecordReader] = {
    "silicon": RecordReader(
        "aiconfigurator's closed-loop benchmark rows (ttft_ms_mean, tpot_ms_mean, ...)",
        lambda src: is_closed_loop_table(src.columns),
        lambda src, _facts: read_closed_loop_rows(src.path, src.lines),
    ),
    "infercast": RecordReader(
        "infercast's measurement CSV (kind, value, ...)",
        lambda src: "kind" in src.columns and "value" in src.columns,
        lambda src, _facts: _read_project_csv(src),
    ),
    "vllm": _bench("vllm"),
    "guidellm": _bench("guidellm"),
    "aiperf": _bench("aiperf"),
}
"""Source formats by name, sniffed in this order (the silicon rows' columns before infercast's own)."""
CSV_FORMATS = ("silicon", "infercast")
"""The formats a measurement CSV (``--data``) may be in."""


def _source(path: Path, field: str) -> SourceFile:
    """A file's lines and CSV columns (empty where it is not a CSV)."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            lines = [(n, line) for n, line in enumerate(handle, start=1) if not line.lstrip().startswith("#")]
    except FileNotFoundError:
        raise InfercastError(f"no such file: {path}", field=field) from None
    except UnicodeDecodeError as exc:
        what = "CSV" if path.suffix.lower() == ".csv" else "file"
        raise InfercastError(
            f"{path} is not a UTF-8 text {what} ({exc.reason} at byte {exc.start})", field=field
        ) from None
    except OSError as exc:
        raise InfercastError(f"cannot read {path}: {exc.strerror or exc}", field=field) from None
    columns: tuple[str, ...] = ()
    if path.suffix.lower() != ".json":
        try:
            columns = tuple(csv.DictReader(line for _, line in lines).fieldnames or ())
        except csv.Error as exc:
            if field == "data":
                raise InfercastError(f"{path} is not a readable CSV: {exc}", field=field) from None
    return SourceFile(path, lines, columns)


def sniff_format(path: str | Path, formats: Iterable[str] = READERS) -> str | None:
    """The name of the first of ``formats`` that ``path`` is in, else None."""
    src = _source(Path(path), "data")
    return next((name for name in formats if READERS[name].sniff(src)), None)


def read_measurements(path: str | Path, facts: RunFacts | None = None, fmt: str = "auto") -> list[Record]:
    """Records of one file of any registered format (``fmt``: sniffed unless given)."""
    path = Path(path)
    if fmt != "auto" and fmt not in READERS:
        raise unknown_choice("format", fmt, ["auto", *READERS])
    src = _source(path, "data")
    name = fmt if fmt != "auto" else next((n for n, r in READERS.items() if r.sniff(src)), None)
    if name is None:
        raise InfercastError(
            f"{path} is in no format infercast reads; known: "
            + "; ".join(f"{n} ({r.what})" for n, r in READERS.items()),
            field="data",
        )
    return READERS[name].read(src, facts or RunFacts())


def read_records(path: str | Path) -> list[Record]:
    """Read a measurement CSV ('#' lines are comments): infercast's own or aiconfigurator's silicon rows."""
    path = Path(path)
    src = _source(path, "data")
    name = next((n for n in CSV_FORMATS if READERS[n].sniff(src)), None)
    if name is None:
        raise InfercastError(
            f"{path} needs at least the columns 'kind' and 'value' (or, for closed-loop benchmark rows in "
            "aiconfigurator's format, 'ttft_ms_mean' and its companions)",
            field="data",
        )
    return READERS[name].read(src, RunFacts())


def _read_project_csv(src: SourceFile) -> list[Record]:
    """Rows of infercast's own CSV, each checked (:func:`~infercast.records.record.check_record`)."""
    path, numbered, columns = src.path, src.lines, src.columns
    reader = csv.DictReader(line for _, line in numbered)
    unknown = [c for c in columns if c not in FIELDS]
    if unknown:
        hints = [
            f"{c!r} (did you mean {', '.join(map(repr, nearest(c, FIELDS, n=1)))}?)"
            if nearest(c, FIELDS, n=1)
            else repr(c)
            for c in unknown
        ]
        raise InfercastError(
            f"{path}:{numbered[0][0]}: unknown column{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; "
            f"known: {', '.join(FIELDS)}",
            field="data",
        )
    out = []
    rows = []
    try:
        for row in reader:  # the row's line in the file (comment lines counted), for error messages
            rows.append((numbered[reader.line_num - 1][0], row))
    except csv.Error as exc:
        raise InfercastError(f"{path} is not a readable CSV: {exc}", field="data") from None
    for line, row in rows:
        where = f"{path}:{line}"
        if None in row:
            raise InfercastError(f"{where}: more cells than columns", field="data")
        kwargs: dict[str, object] = {}
        try:
            for name, raw in row.items():
                if raw is not None and raw.strip() != "":
                    kwargs[name] = parse_cell(name, raw)
            rec = Record(**kwargs, origin=where)  # type: ignore[arg-type]
            check_record(rec)
        except InfercastError as exc:
            raise InfercastError(f"{where}: {exc}", field="data") from None
        out.append(rec)
    if not out:
        raise InfercastError(f"{path} holds no measurements", field="data")
    return out


def measurement_files(paths: Iterable[str | Path]) -> list[Path]:
    """The CSV files named by ``paths``: files as given, folders searched recursively (sorted, no duplicates)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if is_dir(p):
            found = sorted(p.rglob("*.csv"))
            if not found:
                raise InfercastError(f"no measurement CSVs (*.csv) under {p}", field="data")
            files.extend(check_input_file(f, "data") for f in found)
        else:
            files.append(check_input_file(p, "data"))  # missing, symlink loop, not a file: one line
    seen: set[Path] = set()
    unique = []
    for f in files:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def load_records(paths: Iterable[str | Path]) -> list[Record]:
    """Every record of the CSV files and folders in ``paths`` (see :func:`measurement_files`)."""
    files = measurement_files(paths)
    if not files:
        raise InfercastError("give at least one measurement CSV or folder", field="data")
    return [r for f in files for r in read_records(f)]
