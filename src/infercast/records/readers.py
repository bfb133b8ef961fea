"""Reading measurement files: the project's own CSV, or aiconfigurator's closed-loop silicon rows, into
:class:`~infercast.records.record.Record` lists (every error names the file, the row and the field)."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from infercast.errors import InfercastError, nearest
from infercast.files import check_input_file, is_dir
from infercast.records.record import FIELDS, Record, check_record, parse_cell
from infercast.records.silicon_rows import is_closed_loop_table, read_closed_loop_rows


def read_records(path: str | Path) -> list[Record]:
    """Read a measurement CSV ('#' lines are comments); every error names the file, the row and the field."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            numbered = [(n, line) for n, line in enumerate(handle, start=1) if not line.lstrip().startswith("#")]
    except FileNotFoundError:
        raise InfercastError(f"no such file: {path}", field="data") from None
    except UnicodeDecodeError as exc:
        raise InfercastError(
            f"{path} is not a UTF-8 text CSV ({exc.reason} at byte {exc.start})", field="data"
        ) from None
    except OSError as exc:
        raise InfercastError(f"cannot read {path}: {exc.strerror or exc}", field="data") from None
    reader = csv.DictReader(line for _, line in numbered)
    try:
        columns = reader.fieldnames or []
    except csv.Error as exc:
        raise InfercastError(f"{path} is not a readable CSV: {exc}", field="data") from None
    if is_closed_loop_table(columns):  # aiconfigurator's closed-loop benchmark rows (their own columns)
        return read_closed_loop_rows(path, numbered)
    if "kind" not in columns or "value" not in columns:
        raise InfercastError(
            f"{path} needs at least the columns 'kind' and 'value' (or, for closed-loop benchmark rows in "
            "aiconfigurator's format, 'ttft_ms_mean' and its companions)",
            field="data",
        )
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
