"""Library errors name fields by their API names; a command reports them by its own option names.

``with_flags(command)`` wraps a command so that the names of its options quoted in an error's message
(```rate```) read as its flags (``--rate``; other quoted names lose their quotes), and with ``fields`` the
error's field too (``max_num_seqs`` -> ``--max-num-seqs``). Every command gets the first; commands whose
options are the API's keywords (``simulate``) the second.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, TypeVar

from infercast.errors import InfercastError

F = TypeVar("F", bound=Callable[..., Any])

ALIASES = {"prefix_caching": "no_prefix_caching", "json": "json_out"}
"""Fields whose option is spelled differently (a negated flag; ``--json`` held in ``json_out``)."""
_QUOTED = re.compile(r"`([a-z][a-z0-9_]*)`")


def option_flags(command: Callable[..., Any]) -> dict[str, str]:
    """Parameter name -> its flag (``--max-num-seqs``), from the command's typer options."""
    flags: dict[str, str] = {}
    for name, param in inspect.signature(command).parameters.items():
        flag = "--" + name.replace("_", "-")
        for meta in getattr(param.annotation, "__metadata__", ()):
            decls = [d for d in getattr(meta, "param_decls", None) or () if d.startswith("--")]
            flag = decls[0] if decls else flag
        flags[name] = flag
    return flags


def flag_error(exc: InfercastError, flags: dict[str, str], *, fields: bool = True) -> InfercastError:
    """``exc`` with the options quoted in its message (and with ``fields`` its field) named by their flags."""

    def flag(name: str) -> str | None:
        return flags.get(ALIASES.get(name, name))

    message = _QUOTED.sub(lambda m: flag(m.group(1)) or m.group(1), exc.message)
    field = (flag(exc.field) if fields and exc.field else None) or exc.field
    if message == exc.message and field == exc.field:
        return exc
    return type(exc)(message, field=field, allowed=exc.allowed)


def with_flags(command: F, *, fields: bool = True) -> F:
    """Wrap a CLI command so that its errors name its flags (see module docstring)."""
    flags = option_flags(command)

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except InfercastError as exc:
            mapped = flag_error(exc, flags, fields=fields)
            if mapped is exc:
                raise
            raise mapped from None

    return wrapper  # type: ignore[return-value]
