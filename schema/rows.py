"""A small query result held whole: its column names and its rows, read by column name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb


@dataclass(frozen=True)
class Rows:
    """Column names and rows of plain Python values (for a result that is small by nature)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    @classmethod
    def none(cls) -> Rows:
        return cls((), ())

    @classmethod
    def fetched(cls, result: duckdb.DuckDBPyConnection) -> Rows:
        """Every row of the result `Trace.execute` left on its connection."""
        columns = tuple(column[0] for column in result.description or ())
        return cls(columns, tuple(result.fetchall()))

    @classmethod
    def of_structs(cls, items: list[dict[str, Any]] | None) -> Rows:
        """Rows from a list of DuckDB structs (dicts with the same keys)."""
        if not items:
            return cls.none()
        columns = tuple(items[0])
        return cls(columns, tuple(tuple(item[name] for name in columns) for item in items))

    def dicts(self) -> Iterator[dict[str, Any]]:
        for row in self.rows:
            yield dict(zip(self.columns, row, strict=True))

    def __len__(self) -> int:
        return len(self.rows)
