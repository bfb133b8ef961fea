"""Query-string forms: parse each field the way the CLI parses its flag, and keep one error line per field.

A page reads its inputs from the URL (GET forms, so every result has a shareable address); a value that does
not parse, or that the library refuses, becomes the CLI's one-line message shown beside its field.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from infercast.cli.flags import flag_error, option_flags
from infercast.errors import InfercastError

NOT_INT = "Input should be a valid integer, unable to parse string as an integer"
NOT_FLOAT = "Input should be a valid number, unable to parse string as a number"
"""The CLI's words for a value that does not parse (typer's, as ``infercast`` prints them)."""
UPLOAD_PREFIX = "upload:"
"""Field values naming a file uploaded to this server (``upload:<id>``), resolved by :class:`Form.path`."""


class Form:
    """The inputs of one page: raw query values in, typed values out, errors collected by field."""

    def __init__(self, query: Mapping[str, Sequence[str]], *, uploads: Callable[[str], Any] | None = None):
        self.raw = {k: [v for v in vs if v != ""] for k, vs in query.items()}
        self.errors: dict[str, str] = {}
        self.banner: list[str] = []
        self._uploads = uploads
        self._shown: dict[str, str] = {}
        """Uploaded files' paths on this server -> the names their owners gave them (messages show the names)."""

    @property
    def submitted(self) -> bool:
        """True when the page was asked to run (its Run button sets ``run``)."""
        return "run" in self.raw

    def get(self, name: str, default: str = "") -> str:
        values = self.raw.get(name) or []
        return values[0].strip() if values else default

    def many(self, name: str, default: Iterable[str] = ()) -> list[str]:
        """A multi-valued field: repeated parameters and comma-separated values both count."""
        out = [p.strip() for v in self.raw.get(name, []) for p in v.split(",") if p.strip()]
        return out or list(default)

    def fail(self, name: str, message: str) -> None:
        """Record the first error of ``name`` (later ones repeat the cause)."""
        self.errors.setdefault(name, message)

    def integer(self, name: str, default: int | None, flag: str) -> int | None:
        text = self.get(name)
        if not text:
            return default
        try:
            return int(text)
        except ValueError:
            self.fail(name, f"{name}: Invalid value for '{flag}': {NOT_INT}")
            return default

    def number(self, name: str, default: float | None, flag: str) -> float | None:
        text = self.get(name)
        if not text:
            return default
        try:
            return float(text)
        except ValueError:
            self.fail(name, f"{name}: Invalid value for '{flag}': {NOT_FLOAT}")
            return default

    def integers(self, name: str, default: Iterable[int], flag: str) -> list[int]:
        out = []
        for text in self.many(name):
            try:
                out.append(int(text))
            except ValueError:
                self.fail(name, f"{name}: Invalid value for '{flag}': {NOT_INT}")
        return out or list(default)

    def at_most(self, name: str, value: float | None, limit: float, why: str) -> None:
        """Refuse a request that would run too long, naming the limit."""
        if value is not None and value > limit:
            self.fail(name, f"{name}: at most {limit:g} in the web UI ({why}); the CLI has no such limit")

    def path(self, name: str) -> tuple[str, str]:
        """(value for the library, name to show) of a field that may hold an uploaded file."""
        value = self.get(name)
        if value.startswith(UPLOAD_PREFIX) and self._uploads is not None:
            found = self._uploads(value[len(UPLOAD_PREFIX) :])
            if found is None:
                self.fail(name, f"{name}: the uploaded file is gone (the server restarted?); upload it again")
                return "", value
            self._shown[str(found.path)] = found.name
            return str(found.path), found.name
        return value, value

    def library_error(
        self, exc: InfercastError, command: Callable[..., Any], fields: Iterable[str], *, flag_fields: bool = False
    ) -> None:
        """Show a library error as the CLI prints it (``flag_fields``: the command names the field by its flag,
        as ``simulate`` does), beside its field (else as a banner)."""
        mapped = flag_error(exc, option_flags(command), fields=flag_fields)
        text = str(mapped)
        for path, shown in self._shown.items():
            text = text.replace(path, shown)
        field = exc.field if exc.field in set(fields) else None
        if field is None and exc.field:
            for name in fields:  # the library sometimes names a sub-field: kv_precision for precision's row
                if exc.field.startswith(name) or name.startswith(exc.field):
                    field = name
                    break
        if field:
            self.fail(field, text)
        else:
            self.banner.append(text)

    def query_items(self, drop: Iterable[str] = ("run", "job")) -> list[tuple[str, str]]:
        """The page's inputs as (name, value) pairs, for links back to the same inputs."""
        skip = set(drop)
        return [(k, v) for k, vs in self.raw.items() if k not in skip for v in vs]


def cli_line(command: str, options: Iterable[tuple[str, Any]]) -> str:
    """``infercast <command> --flag value ...`` for the options that are set (True: a bare flag)."""
    parts = ["infercast", command]
    for flag, value in options:
        if value is None or value == "" or value is False:
            continue
        parts.append(flag)
        if value is not True:
            parts.append(shlex.quote(str(value)))
    return " ".join(parts)
