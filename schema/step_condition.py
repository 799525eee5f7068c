"""A user's SQL condition over a step's columns, evaluated in the sandbox a trace is read in.

The columns are one step's counts and request ids (`STEP_COLUMNS`): a trace's steps read
them through `condition_rows`, and the condition runs on those rows alone, in a locked
connection of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from .lockdown import connect_locked, connect_unlocked, lock
from .member_views import create_enum_types, logical_select
from .sql_files import query
from .trace import Trace
from .trace_error import TraceError
from .trace_file import first_line

STEP_COLUMNS: dict[str, Any] = {
    "step": 0,
    "idle": True,
    "num_scheduled_tokens": 0,
    "num_scheduled_reqs": 0,
    "num_preemptions": 0,
    "num_finished": 0,
    "num_free_blocks_after_schedule": None,
    "running_pass_end": None,
    "admission_stop": None,
    "scheduled_ids": [],
    "preempted_ids": [],
    "finished_ids": [],
    "arrived_ids": [],
}
"""The columns a condition reads (`sql/break_step_row.sql`), each with its value at an idle
step."""


def condition_rows(trace: Trace, first: int, last: int) -> pa.Table:
    """Steps `first`..`last` of `trace` as a condition reads them (`STEP_COLUMNS`), by step."""
    return trace.arrow(query(__package__, "condition_steps"), [first, last])


STORED_SKIPPED = ("blocked_request_index",)
"""Of the columns a step stores, those a stored-step condition does not read (the `steps`
view joins this one to a request id)."""


def stored_step_rows(files: Sequence[Path]) -> pa.Table:
    """The `_steps` rows of a recording's Parquet files (a segment's, or its parts'), typed as
    a reader types them, less `STORED_SKIPPED`; none but the columns when `files` is empty."""
    con = connect_unlocked()
    try:
        create_enum_types(con)
        listed = [str(path) for path in files]
        have: set[str] = set()
        if listed:
            described = con.execute(query(__package__, "stored_step_columns"), [listed])
            have = {row[0] for row in described.fetchall()}
        lock(con, sorted({path.parent for path in files}))
        source = "read_parquet($files)" if listed else None
        steps = logical_select("_steps", have, source, cast=True)
        rows = con.sql(steps, params={"files": listed} if listed else None).to_arrow_table()
        return rows.drop_columns(list(STORED_SKIPPED))
    finally:
        con.close()


class StepCondition:
    """A SQL condition over a step's columns, e.g. `num_free_blocks_after_schedule < 10`.

    Columns: step, idle, num_scheduled_tokens, num_scheduled_reqs, num_preemptions,
    num_finished, num_free_blocks_after_schedule, running_pass_end, admission_stop,
    scheduled_ids, preempted_ids, finished_ids, arrived_ids (lists of request ids).
    A condition that does not bind is a TraceError when it is made.
    """

    def __init__(self, condition: str, columns: pa.Table | None = None) -> None:
        """`columns`: rows (none needed) of other columns to read instead of `STEP_COLUMNS`,
        such as `stored_step_rows`'."""
        self.condition = condition.strip()
        self._con = connect_locked()
        # The user's own condition, run where it can read nothing but the rows it is given.
        self._sql = f"SELECT min(step) FROM step_rows WHERE coalesce(({self.condition}), FALSE)"
        try:
            if columns is None:
                self.holds(STEP_COLUMNS)
            else:
                self.first_step(columns.slice(0, 0))
        except BaseException:
            self._con.close()
            raise

    def holds(self, columns: dict[str, Any]) -> bool:
        """Whether the condition is true of a step with these `STEP_COLUMNS`."""
        try:
            row = self._con.sql(query(__package__, "break_step_row"), params=columns)
            table = row.to_arrow_table()
        except duckdb.Error as error:
            raise TraceError(first_line(error)) from None
        return self.first_step(table) is not None

    def first_step(self, rows: pa.Table) -> int | None:
        """The first step of `rows` (`condition_rows`) the condition is true of, if any."""
        try:
            self._con.register("step_rows", rows)
            ((step,),) = self._con.sql(self._sql).fetchall()
        except duckdb.Error as error:
            raise TraceError(first_line(error)) from None
        finally:
            self._con.unregister("step_rows")
        return None if step is None else int(step)

    def close(self) -> None:
        self._con.close()
