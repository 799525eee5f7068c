"""Typed reads from parsed TOML tables; a bad value raises `SpecError` naming its key path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..json_fields import finite, short
from ..memory_limit import INT32_MAX

KeyPath = tuple[str | int, ...]

_MISSING: Any = object()


class SpecError(ValueError):
    """A validation failure at a key path such as ("prefix_groups", 1, "share")."""

    def __init__(self, path: KeyPath, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def key_name(path: KeyPath) -> str:
    """`prefix_groups[1].share`, `arrivals.rate` or `top level`."""
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else f".{part}" if name else part
    return name or "top level"


class TableReader:
    """One TOML table, read field by field with types and ranges checked."""

    def __init__(self, raw: Mapping[str, Any], path: KeyPath = ()) -> None:
        self.raw = raw
        self.path = path

    def error(self, key: str, message: str) -> SpecError:
        return SpecError((*self.path, key), message)

    def reject_unknown(self, known: set[str]) -> None:
        unknown = sorted(set(self.raw) - known)
        if unknown:
            raise self.error(unknown[0], f"unknown key (known: {', '.join(sorted(known))})")

    def has(self, key: str) -> bool:
        return key in self.raw

    def integer(
        self,
        key: str,
        default: Any = _MISSING,
        minimum: int | None = None,
        maximum: int = INT32_MAX,
    ) -> int:
        """An integer in range; by default no bigger than a trace's INTEGER columns hold."""
        value = self._get(key, default, "an integer")
        return _integer((*self.path, key), value, minimum, maximum)

    def optional_integer(
        self, key: str, minimum: int | None = None, maximum: int = INT32_MAX
    ) -> int | None:
        return self.integer(key, minimum=minimum, maximum=maximum) if key in self.raw else None

    def number(
        self,
        key: str,
        default: Any = _MISSING,
        minimum: float | None = None,
        *,
        positive: bool = False,
    ) -> float:
        value = self._get(key, default, "a number")
        return _number((*self.path, key), value, minimum, positive=positive)

    def string(self, key: str, default: Any = _MISSING) -> str:
        value = self._get(key, default, "a string")
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {value!r}")
        return value

    def choice(self, key: str, choices: tuple[str, ...]) -> str:
        value = self.string(key)
        if value not in choices:
            raise self.error(key, f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def integers(self, key: str, minimum: int | None = None) -> tuple[int, ...]:
        path = (*self.path, key)
        return tuple(
            _integer((*path, index), value, minimum, INT32_MAX)
            for index, value in enumerate(self._list(key))
        )

    def numbers(self, key: str, minimum: float | None = None) -> tuple[float, ...]:
        path = (*self.path, key)
        return tuple(
            _number((*path, index), value, minimum, positive=False)
            for index, value in enumerate(self._list(key))
        )

    def table(self, key: str) -> TableReader | None:
        if key not in self.raw:
            return None
        value = self.raw[key]
        if not isinstance(value, dict):
            raise self.error(key, f"expected a table, got {value!r}")
        return TableReader(value, (*self.path, key))

    def required_table(self, key: str) -> TableReader:
        table = self.table(key)
        if table is None:
            raise self.error(key, "required, a table")
        return table

    def array_of_tables(self, key: str) -> list[TableReader]:
        values = self.raw.get(key, [])
        if not isinstance(values, list) or not all(isinstance(v, dict) for v in values):
            raise self.error(key, "expected an array of tables ([[...]])")
        return [TableReader(value, (*self.path, key, index)) for index, value in enumerate(values)]

    def _get(self, key: str, default: Any, kind: str) -> Any:
        value = self.raw.get(key, default)
        if value is _MISSING:
            raise self.error(key, f"required, {kind}")
        return value

    def _list(self, key: str) -> list[Any]:
        value = self.raw.get(key, [])
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {value!r}")
        return value


def _integer(path: KeyPath, value: Any, minimum: int | None, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(path, f"expected an integer, got {short(value)}")
    low = -maximum - 1 if minimum is None else minimum
    if value < low:
        raise SpecError(path, f"must be at least {low}, got {short(value)}")
    if value > maximum:
        raise SpecError(path, f"must be at most {maximum}, got {short(value)}")
    return value


def _number(path: KeyPath, value: Any, minimum: float | None, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not finite(value):
        raise SpecError(path, f"expected a finite number, got {short(value)}")
    if positive and value <= 0:
        raise SpecError(path, f"must be greater than 0, got {value}")
    if minimum is not None and value < minimum:
        raise SpecError(path, f"must be at least {minimum:g}, got {value}")
    return float(value)


def line_of(text: str, path: KeyPath) -> int | None:
    """The line that sets the key at `path`, else the header of its nearest table, if found."""
    table: KeyPath = ()
    array_counts: dict[str, int] = {}
    header_line: int | None = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.split("#", 1)[0].strip()
        if stripped.startswith("[["):
            name = stripped[2:].split("]]", 1)[0].strip()
            array_counts[name] = array_counts.get(name, -1) + 1
            table = (name, array_counts[name])
        elif stripped.startswith("["):
            table = (stripped[1:].split("]", 1)[0].strip(),)
        elif "=" in stripped:
            key = stripped.split("=", 1)[0].strip()
            if (*table, key) == path[: len(table) + 1]:
                return number
            continue
        else:
            continue
        if table and table == path[: len(table)]:
            header_line = number
    return header_line
