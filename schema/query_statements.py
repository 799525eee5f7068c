"""Which statements a trace answers: queries only, on one trace as on a set.

A trace opens read-only, yet the reader's own TEMP views (every view a user queries)
could still be dropped or replaced, and TEMP tables made; a statement that is not a
query is refused before it runs.
"""

from __future__ import annotations

import re
from functools import lru_cache

import duckdb

from .trace_file import first_line

QUERY_STATEMENTS = frozenset(
    {
        duckdb.StatementType.SELECT,
        duckdb.StatementType.EXPLAIN,
        duckdb.StatementType.PRAGMA,
        duckdb.StatementType.CALL,
        duckdb.StatementType.MULTI,
    }
)
"""The statement types that only read: DESCRIBE, SHOW and SUMMARIZE parse as SELECT; a PIVOT
whose columns come from the data parses as MULTI (a TEMP enum of those values, then the
SELECT), the one statement DuckDB's parser makes MULTI: `;`-separated text is several."""

_BARE_NAME = re.compile(r'\s*("?)([A-Za-z_][A-Za-z_0-9]*)\1\s*;?\s*')


@lru_cache(maxsize=256)  # the reader's own queries are asked again and again
def statement_problem(query: str, names: frozenset[str]) -> str | None:
    """Why `query` is not one a trace answers (None when it is): DuckDB's parser error, with
    `SELECT * FROM name` suggested when it is only the name of one of `names`; an empty
    query; a statement that is not a query."""
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as error:
        return _parser_problem(error, query, names)
    return _kinds_problem(statements)


def parser_error(query: str) -> str | None:
    """DuckDB's whole parser error for `query` (its caret under the bad token), None when it
    parses."""
    try:
        duckdb.extract_statements(query)
    except duckdb.Error as error:
        return str(error).strip() or type(error).__name__
    return None


def _kinds_problem(statements: list[duckdb.Statement]) -> str | None:
    if not statements:
        return "the query is empty (it holds no statement)"
    for statement in statements:
        if statement.type not in QUERY_STATEMENTS:
            return (
                f"{statement.type.name} is not a query: a trace is read-only "
                "(SELECT, DESCRIBE, SHOW, EXPLAIN)"
            )
    return None


def _parser_problem(error: duckdb.Error, query: str, names: frozenset[str]) -> str:
    bare = _BARE_NAME.fullmatch(query)
    if bare is None or bare.group(2).lower() not in names:
        return first_line(error)
    name = bare.group(2)
    return f"{first_line(error)}: {name} alone is a name, not a query (try SELECT * FROM {name})"
