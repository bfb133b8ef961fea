"""Reading user files and writing outputs at the boundary: one-line errors, no partial outputs.

Every user file (HF ``config.json``, hardware YAML, traces) is read through :func:`read_text`, which turns
missing files, folders, symlink loops, unreadable or oversized files and non-UTF-8 bytes into an
:class:`~infercast.errors.InfercastError` naming the option. :func:`load_json` and :func:`load_yaml` also
refuse non-finite numbers (``NaN``, ``Infinity``, ``.inf``) and nesting deeper than any real config.
Outputs are checked before a run starts (:func:`check_output_file`, :func:`check_output_dir`) and written
through :func:`atomic_write` (temporary file in the same folder, then ``os.replace``), so a failure never
leaves a half-written file behind.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from infercast.errors import InfercastError

MAX_INPUT_BYTES = 2 * 1024**3
"""Largest user file read (2 GiB): the published traces are a few hundred MB at most."""
MAX_NESTING = 64
"""Deepest JSON/YAML nesting accepted; HF configs nest 3-4 levels, hardware YAML 2."""
PACKAGE_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""Loader of the package's own YAML (catalogs, profiles, error bands): libyaml's safe loader where PyYAML was
built with it. The pure-Python one took 1.26 s for the 11 files a first prediction reads, libyaml's 0.16 s (both
under cProfile, 2026-11-27); the data are the same (checked on every file the package ships)."""


def parse_package_yaml(text: str) -> Any:
    """YAML the package ships (safe loader, libyaml's when available). User files go through :func:`load_yaml`."""
    return yaml.load(text, Loader=PACKAGE_YAML_LOADER)


def is_file(path: str | Path) -> bool:
    """``Path.is_file()`` that answers False for names the OS refuses (too long, NUL bytes) instead of raising."""
    try:
        return Path(path).expanduser().is_file()
    except (OSError, ValueError):
        return False


def is_dir(path: str | Path) -> bool:
    """``Path.is_dir()`` that answers False for names the OS refuses instead of raising."""
    try:
        return Path(path).expanduser().is_dir()
    except (OSError, ValueError):
        return False


def check_input_file(path: str | Path, field: str) -> Path:
    """``path`` as a readable regular file, or a one-line error saying what it is instead."""
    p = Path(path).expanduser()
    try:
        st = p.stat()  # follows symlinks: a loop raises OSError (ELOOP)
    except FileNotFoundError:
        raise InfercastError(f"no such file: {p}", field=field) from None
    except (OSError, ValueError) as exc:
        raise InfercastError(f"cannot open {p}: {getattr(exc, 'strerror', None) or exc}", field=field) from None
    if p.is_dir():
        raise InfercastError(f"{p} is a folder, expected a file", field=field)
    if not p.is_file():
        raise InfercastError(f"{p} is not a regular file", field=field)
    if st.st_size > MAX_INPUT_BYTES:
        raise InfercastError(f"{p} is {st.st_size / 1024**3:.1f} GiB; the limit is 2 GiB", field=field)
    return p


def read_text(path: str | Path, field: str) -> str:
    """The UTF-8 text of a user file (see :func:`check_input_file`); bad bytes name the byte offset."""
    p = check_input_file(path, field)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InfercastError(f"cannot read {p}: {exc.strerror or exc}", field=field) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InfercastError(f"{p} is not UTF-8 text (byte {exc.start})", field=field) from None


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def parse_json(text: str, where: str, field: str) -> Any:
    """JSON text -> value; NaN/Infinity, nesting past :data:`MAX_NESTING` and syntax errors are one line."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise InfercastError(f"{where} is not valid JSON ({exc.msg} at line {exc.lineno})", field=field) from None
    except ValueError as exc:  # parse_constant, or an integer too long to convert
        raise InfercastError(f"{where}: {exc}", field=field) from None
    except RecursionError:
        raise InfercastError(f"{where} nests deeper than {MAX_NESTING} levels", field=field) from None
    check_tree(value, where, field)
    return value


def load_json(path: str | Path, field: str) -> Any:
    """A JSON user file, validated as :func:`parse_json`."""
    return parse_json(read_text(path, field), str(Path(path).expanduser()), field)


def load_yaml(path: str | Path, field: str) -> Any:
    """A YAML user file (safe loader); ``.inf``/``.nan`` and over-deep nesting refused."""
    p = Path(path).expanduser()
    text = read_text(p, field)
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise InfercastError(f"{p} is not valid YAML ({problem}{at})", field=field) from None
    except RecursionError:
        raise InfercastError(f"{p} nests deeper than {MAX_NESTING} levels", field=field) from None
    check_tree(value, str(p), field)
    return value


def check_tree(value: Any, where: str, field: str) -> None:
    """Refuse non-finite floats and nesting deeper than :data:`MAX_NESTING` anywhere in parsed data. Each container
    is visited once: YAML aliases share one object many times over (an 8-line file can name 10^8 nodes)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    seen: set[int] = set()
    while stack:
        node, key, depth = stack.pop()
        if depth > MAX_NESTING:
            raise InfercastError(f"{where} nests deeper than {MAX_NESTING} levels", field=field)
        if isinstance(node, float) and not math.isfinite(node):
            raise InfercastError(f"{where}: {key or 'value'} is {node}, expected a finite number", field=field)
        if isinstance(node, dict | list):
            if id(node) in seen:
                continue
            seen.add(id(node))
        if isinstance(node, dict):
            stack.extend((v, f"{key}.{k}" if key else str(k), depth + 1) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{key}[{i}]", depth + 1) for i, v in enumerate(node))


# ----------------------------------------------------------------------------------------------------------
# outputs
# ----------------------------------------------------------------------------------------------------------


def check_output_file(
    path: str | Path, field: str, suffixes: tuple[str, ...] | None = None, *, create_parents: bool = False
) -> Path:
    """Refuse, before any work, an output path that cannot be written: wrong extension, a folder in its
    place, a parent that is not a folder or not writable, or a missing parent (unless ``create_parents``:
    then its nearest existing ancestor must be a writable folder; the writer creates the rest)."""
    _require_name(path, field)
    p = Path(path).expanduser()
    name = p.name.lower()
    if suffixes is not None and not name.endswith(tuple(s.lower() for s in suffixes)):
        raise InfercastError(f"must end in {', '.join(suffixes)}, got {str(p)!r}", field=field)
    if p.is_dir():
        raise InfercastError(f"{p} is a folder, expected a file name", field=field)
    parent = p.parent
    if create_parents:
        while not parent.exists() and not parent.is_symlink() and parent != parent.parent:
            parent = parent.parent
    _check_writable_dir(parent, field, repr(str(parent)))
    return p


def check_output_dir(path: str | Path, field: str) -> Path:
    """Refuse an output folder that exists as a file, or whose nearest existing ancestor is not a writable
    folder (a missing folder is created by the writer, after the run)."""
    _require_name(path, field)
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise InfercastError(f"{p} exists and is not a folder", field=field)
    folder = p
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        folder = folder.parent
    _check_writable_dir(folder, field, repr(str(folder)))
    return p


def _require_name(path: str | Path, field: str) -> None:
    """An output path must be given ('' would silently mean the current folder) and be one the OS can name: no
    NUL byte, no component over NAME_MAX (255) bytes, at most PATH_MAX (4096) bytes in all (Linux limits)."""
    text = str(path)
    if not text.strip() or text.strip() == ".":
        raise InfercastError(f"needs a path, got {text!r}", field=field)
    if "\0" in text:
        raise InfercastError("must not contain a NUL byte", field=field)
    encoded = os.fsencode(text)
    if len(encoded) > _PATH_MAX or any(len(part) > _NAME_MAX for part in encoded.split(b"/")):
        raise InfercastError(
            f"is too long for a file name ({len(encoded)} bytes; at most {_NAME_MAX} per "
            f"folder or file name, {_PATH_MAX} in all)",
            field=field,
        )


_NAME_MAX, _PATH_MAX = 255, 4096


def _check_writable_dir(folder: Path, field: str, what: str) -> None:
    try:
        is_dir = folder.is_dir()
    except OSError as exc:
        raise InfercastError(f"{what} cannot be used: {exc.strerror or exc}", field=field) from None
    if not is_dir:
        kind = "is not a folder" if folder.exists() else "does not exist"
        raise InfercastError(f"{what} {kind}", field=field)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InfercastError(f"{what} is not writable", field=field)
    try:  # the real test (root passes os.access everywhere; /proc and read-only mounts refuse new files)
        with tempfile.TemporaryFile(dir=folder, prefix=".infercast-tmp-probe-"):
            pass
    except OSError as exc:
        raise InfercastError(f"{what} is not writable ({exc.strerror or exc})", field=field) from None


def make_dir(path: str | Path, field: str) -> Path:
    """Create an output folder (and its parents); failures are one-line errors naming ``field``."""
    p = Path(path).expanduser()
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InfercastError(f"cannot create folder {p}: {exc.strerror or exc}", field=field) from None
    return p


@contextmanager
def atomic_path(path: str | Path, field: str) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path`` atomically, on failure it is
    removed (so ``path`` is either the complete new file or untouched)."""
    p = Path(path).expanduser()
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        # the temporary name ends with the real one, so writers that infer a format (.csv.gz) still do
        fd, tmp_name = tempfile.mkstemp(prefix=".infercast-tmp-", suffix=f"-{p.name}", dir=p.parent)
    except OSError as exc:
        raise InfercastError(f"cannot write {p}: {exc.strerror or exc}", field=field) from None
    os.close(fd)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the output gets the usual permissions
    try:
        yield tmp
        os.replace(tmp, p)
    except OSError as exc:
        raise InfercastError(f"cannot write {p}: {exc.strerror or exc}", field=field) from None
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write(path: str | Path, field: str, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp_path)`` and move the result onto ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path, field) as tmp:
        write(tmp)
    return Path(path).expanduser()
