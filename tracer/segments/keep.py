"""The keep rule: a SQL condition over a segment's steps that spares it from retention.

    keep="num_preemptions > 0"      a closed segment with a step where it holds is kept
    keep_max=500MB                  kept segments take at most this (the oldest go past it)

The condition is an expression over the columns each step stores (the `steps` view's, less
`blocked_request_id`, `num_draft_tokens` and `draft_slots`, which it joins from other
tables), typed as a reader types them. It is checked once when the recording starts (one
line naming the setting when it does not parse or bind) and evaluated on the writer's
thread when a segment closes, never on the engine's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
from stepscope.schema.member_views import create_enum_types, logical_select

_STEPS = "_steps"
_SKIPPED_COLUMNS = ("blocked_request_index",)
"""Stored for the `steps` view's join, not a column of the view."""


def check_keep_condition(condition: str, setting: str) -> str:
    """`condition`, stripped, once it is one SQL expression over a step's columns; else a
    ValueError naming `setting`."""
    text = condition.strip()
    if not text:
        raise ValueError(f"{setting}: empty; give a condition over a step's columns")
    query = _query(text, logical_select(_STEPS, (), None, cast=True))
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as error:
        raise ValueError(f"{setting}={condition!r}: {_first_line(error)}") from None
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        raise ValueError(f"{setting}={condition!r}: not one condition (an expression, no ';')")
    with _connection() as con:
        try:
            con.execute(query).fetchall()
        except duckdb.Error as error:
            raise ValueError(f"{setting}={condition!r}: {_first_line(error)}") from None
    return text


def segment_matches(condition: str, steps_files: Sequence[Path]) -> bool:
    """Whether `condition` holds at any step of the files (a segment's, or its parts')."""
    if not steps_files:
        return False
    # Paths the writer made itself, quoted as SQL literals: spliced in.
    listed = ", ".join("'" + str(path).replace("'", "''") + "'" for path in steps_files)
    source = f"read_parquet([{listed}])"
    with _connection() as con:
        have = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
        ((matched,),) = con.execute(
            _query(condition, logical_select(_STEPS, have, source, cast=True))
        ).fetchall()
    return bool(matched)


def _query(condition: str, steps: str) -> str:
    # The condition is the operator's own setting, checked to parse as one expression.
    return (
        f"SELECT coalesce(bool_or(({condition})), false) "
        f"FROM (SELECT * EXCLUDE ({', '.join(_SKIPPED_COLUMNS)}) FROM ({steps}))"
    )


def _connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:", config={"threads": 1})
    create_enum_types(con)
    return con


def _first_line(error: duckdb.Error) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
