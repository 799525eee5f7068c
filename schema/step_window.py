"""A window of a trace's steps, and a trace read through one.

`--from-step/--to-step` name the window. A reader given one (`open_trace(path, window)`)
answers every query with the window's rows only: each table keyed by `step` is cut to
it, and `_requests` to the requests its rows name (arriving in it, scheduled, allocated,
preempted or finishing in it, or held in one of its checkpoints). Every view reads those
tables, so each answers as if the trace were the window: a request that finishes after
the window's last step is unfinished in it. `_meta` and `_config` stay whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from .ddl import table_specs
from .member_views import create_views
from .sql_files import query
from .trace_error import TraceError


@dataclass(frozen=True)
class StepWindow:
    """The steps `from_step` to `to_step` (None: to the end), both included."""

    from_step: int = 0
    to_step: int | None = None

    @property
    def whole(self) -> bool:
        return self.from_step == 0 and self.to_step is None


WHOLE = StepWindow()

REQUESTS = "_requests"
"""The one logical table a window cuts by what the others name, not by its own steps."""
_NAMED = "_window_named"
"""A view of the request indices the cut tables' rows name (`window_requests.sql`)."""
_LISTED = "_window_requests"
"""Those indices, each once, in a table of the reader's database."""


def create_window(
    con: duckdb.DuckDBPyConnection, schema: str, tables: dict[str, str], window: StepWindow
) -> dict[str, str]:
    """Read the trace's logical tables (name → SELECT) in `schema` through `window`: create
    the tables keyed by `step`, cut to it, and the list of the requests their rows name
    (`_window_requests`, a table: a view would bind its ten-way union into every view
    over `_requests`, which costs more than reading the window). The SELECTs left to create
    are returned, `_requests` reading that list; for the whole trace, `tables` as given."""
    if window.whole:
        return tables
    within = _within("step", window)
    cut = {name: f"SELECT * FROM ({tables[name]}) WHERE {within}" for name in _step_tables()}
    create_views(con, schema, cut)
    create_views(con, schema, {_NAMED: query(__package__, "window_requests")})
    # Identifiers: the schema's name and this module's own.
    con.execute(
        f"CREATE TABLE {schema}.{_LISTED} AS SELECT DISTINCT request_index "
        f"FROM {schema}.{_NAMED} WHERE request_index IS NOT NULL"
    )
    selects = {name: select for name, select in tables.items() if name not in cut}
    selects[REQUESTS] = (
        f"SELECT * FROM ({tables[REQUESTS]}) WHERE ({_within('arrival_step', window)}) "
        f"OR request_index IN (SELECT request_index FROM {_LISTED})"
    )
    return selects


def check_held(window: StepWindow, path: Path, held: tuple[int, int, int]) -> None:
    """A window whose bounds the trace holds (`held`: its steps, first and last), or a
    one-line error naming the bound and the steps it holds. `--from-step 0` is the trace's
    first step, which a recording whose oldest segments were deleted holds no longer."""
    if window.whole:
        return
    count, first, last = held
    if not count:
        raise TraceError(f"{path}: no steps recorded yet, so none in --from-step/--to-step")
    start, end = window.from_step, window.to_step
    if start > last or (start and start < first):
        raise TraceError(f"--from-step {start}: {path} has steps {first}..{last}")
    if end is not None and not first <= end <= last:
        raise TraceError(f"--to-step {end}: {path} has steps {first}..{last}")


def _within(column: str, window: StepWindow) -> str:
    """`column` in the window, as a SQL condition (the steps are ints: spliced in)."""
    low = f"{column} >= {int(window.from_step)}"
    return low if window.to_step is None else f"{low} AND {column} <= {int(window.to_step)}"


def _step_tables() -> tuple[str, ...]:
    return tuple(
        spec.name for spec in table_specs() if any(column[0] == "step" for column in spec.columns)
    )
