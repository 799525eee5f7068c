"""A query's rows read a batch at a time, so a result is never held whole, however long."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb


class QueryRows:
    """The open result of a relation (asked without parameters) run on its connection, its rows
    as `fetchall` gives them.

    DuckDB streams the result as it is read; the connection is busy with it until it is
    read to its end or the trace is closed.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, relation: duckdb.DuckDBPyRelation) -> None:
        self.columns: list[str] = list(relation.columns)
        self._relation = relation  # keeps what the statement reads (a PRAGMA's rows) alive
        self._con = con
        con.execute(relation.sql_query())

    def fetch(self, max_rows: int) -> list[tuple[Any, ...]]:
        """The next rows, at most `max_rows` of them; none once the result is read out."""
        rows: list[tuple[Any, ...]] = []
        while len(rows) < max_rows:
            batch = self._con.fetchmany(max_rows - len(rows))
            if not batch:
                break
            rows.extend(batch)
        return rows

    def batches(self, batch_rows: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rest of the rows, `batch_rows` at a time."""
        while batch := self._con.fetchmany(batch_rows):
            yield batch
