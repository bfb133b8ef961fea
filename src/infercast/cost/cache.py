"""One bounded memo for values derived from spec objects (cost models, operator tables, compiled step costs).

Specs are frozen but not hashed cheaply, so entries are keyed by the *identity* of the objects they derive
from plus plain values; each entry holds its objects, so an id cannot be reused by another object while
the entry lives. When full, the memo starts over (the values are cheap to rebuild, the working set small).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable
from dataclasses import fields
from functools import cache
from typing import Generic, TypeVar

V = TypeVar("V")


class SpecCache(Generic[V]):
    """``get(objects, values, build)``: ``build()`` once per distinct (objects by identity, values)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._entries: dict[tuple, tuple[tuple[object, ...], V]] = {}

    def get(self, objects: tuple[object, ...], values: tuple[Hashable, ...], build: Callable[[], V]) -> V:
        key = (*map(id, objects), *values)
        hit = self._entries.get(key)
        if hit is not None and len(hit[0]) == len(objects) and all(map(operator.is_, hit[0], objects)):
            return hit[1]
        if len(self._entries) >= self.limit:
            self._entries.clear()
        value = build()
        self._entries[key] = (objects, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


def spec_key(spec: object) -> tuple[tuple[object, ...], tuple[Hashable, ...]]:
    """A frozen dataclass's fields split into objects (keyed by identity) and plain values, for :meth:`SpecCache.get`:
    every field takes part, so a field added later cannot be silently left out of a key. Remembered per object
    (by identity, holding it so its id is not reused), as specs are frozen."""
    hit = _keys.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    objects: list[object] = []
    values: list[Hashable] = []
    for name in _field_names(type(spec)):  # type: ignore[arg-type]  # classes hash; typeshed's Hashable misses type[object]
        value = getattr(spec, name)
        if value is None or isinstance(value, _PLAIN):
            values.append((name, value))
        else:
            objects.append(value)
    key = tuple(objects), tuple(values)
    if len(_keys) >= _KEYS_LIMIT:
        _keys.clear()
    _keys[id(spec)] = (spec, key)
    return key


_keys: dict[int, tuple[object, tuple[tuple[object, ...], tuple[Hashable, ...]]]] = {}
_KEYS_LIMIT = 4096


_PLAIN = (str, int, float, bool)


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names, in order (classes do not change their fields)."""
    return tuple(f.name for f in fields(cls))
