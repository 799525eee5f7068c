"""A sweep result read back: its facts (`sweep_meta`) and its grid points (`sweep_points`).

The file is opened read-only with external access off, as a trace is: a result
someone else made carries data, never behaviour.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from stepscope.engine import InputError
from stepscope.schema.lockdown import connect_locked
from stepscope.schema.trace_file import damaged, first_line, not_duckdb

from ..sql import query

SWEEP_SCHEMA_VERSION = "1"

_NUMERIC_TYPES = frozenset(
    {
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "FLOAT",
        "DOUBLE",
    }
)
"""DuckDB types an objective can be taken over (DECIMAL too, by prefix)."""

BUILT_IN_SCHEDULERS = "stepscope.engine."
"""The engine's own schedulers (`sweep_meta.scheduler` joins several with `, `): a replay picks
the right one from the config by itself."""

NOT_OBJECTIVES = frozenset({"point"})
"""Numeric columns that name a point rather than measure it."""


class SweepError(InputError):
    """A file that is not a readable sweep result, or a question it cannot answer."""


@dataclass(frozen=True)
class SweepResult:
    path: Path
    meta: dict[str, str]
    knobs: tuple[str, ...]
    """The grid's knobs, in the order given (the last varies fastest)."""
    columns: tuple[str, ...]
    numeric_columns: tuple[str, ...]
    """The columns an objective can name: knobs and metrics with numbers in them."""
    points: tuple[dict[str, Any], ...]

    @property
    def fit_ok(self) -> bool:
        return self.meta.get("fit_ok") == "true"

    @property
    def fit_note(self) -> str:
        """What the step-time fit allows: seconds, or why they are NULL."""
        if self.fit_ok:
            r2 = self.meta.get("fit_r2", "")
            shown = f"{float(r2):.3f}" if r2.replace(".", "", 1).isdigit() else r2 or "?"
            return f"step-time fit R² {shown}: seconds are modelled"
        problem = self.meta.get("fit_problem") or "no usable step timings"
        return f"no seconds: {seconds_problem(problem, windowed=self.windowed)}"

    @property
    def windowed(self) -> bool:
        """Whether its points ran over a step window (`sweep --from-step/--to-step`)."""
        return bool(self.meta.get("from_step") or self.meta.get("to_step"))

    @property
    def trace(self) -> Path:
        """The swept trace, as recorded; relative to the result's folder if not found as is."""
        return resolve_beside(self.path, self.meta.get("trace", ""))

    def grid(self) -> dict[str, list[Any]]:
        """Each knob's values, in the order given."""
        grid: dict[str, list[Any]] = json.loads(self.meta.get("grid", "{}"))
        return grid


def resolve_beside(result: Path, recorded: str) -> Path:
    """A path the result names: as written if it exists, else relative to the result's folder."""
    path = Path(recorded)
    if path.is_absolute() or path.exists():
        return path
    beside = result.parent / path
    return beside if beside.exists() else path


def read_sweep(path: Path) -> SweepResult:
    """Read a sweep result whole; SweepError in one line when the file is not one."""
    con = _connect(path)
    try:
        meta = _read_meta(con, path)
        relation = con.table("sweep_points").order("point")
        columns = tuple(relation.columns)
        types = [str(t) for t in relation.types]
        rows = relation.fetchall()
    except duckdb.Error as error:
        raise SweepError(f"{path}: {first_line(error)}") from None
    finally:
        con.close()
    knobs = tuple(_grid_knobs(meta, path))
    missing = [knob for knob in knobs if knob not in columns]
    if missing:
        raise SweepError(f"{path}: sweep_points lacks the grid's knob columns {missing}")
    numeric = tuple(
        c
        for c, t in zip(columns, types, strict=True)
        if (t in _NUMERIC_TYPES or t.startswith("DECIMAL")) and c not in NOT_OBJECTIVES
    )
    points = tuple(dict(zip(columns, row, strict=True)) for row in rows)
    return SweepResult(path, meta, knobs, columns, numeric, points)


def is_sweep_result(path: Path) -> bool:
    """Whether `path` is a DuckDB file holding a `sweep_meta` table (readable or not)."""
    if not path.is_file() or not_duckdb(path) is not None:
        return False
    try:
        con = connect_locked(path)
    except duckdb.Error:
        return False
    try:
        return "sweep_meta" in {row[0] for row in con.sql(query("sweep_view_tables")).fetchall()}
    except duckdb.Error:
        return False
    finally:
        con.close()


def _connect(path: Path) -> duckdb.DuckDBPyConnection:
    if not path.is_file():
        raise SweepError(f"{path}: no such file")
    if not_duckdb(path) is not None:
        raise SweepError(f"{path}: not a sweep result (not a DuckDB file)")
    try:
        return connect_locked(path)
    except duckdb.Error as error:
        raise SweepError(damaged(path, error)) from None


def _read_meta(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    tables = {row[0] for row in con.sql(query("sweep_view_tables")).fetchall()}
    if not {"sweep_meta", "sweep_points"} <= tables:
        kind = "a stepscope trace" if "_meta" in tables else "a DuckDB file"
        raise SweepError(f"{path}: {kind}, not a sweep result (no sweep_meta and sweep_points)")
    rows = con.table("sweep_meta").select("key", "value").fetchall()
    meta = {str(key): str(value) for key, value in rows if value is not None}
    version = meta.get("sweep_schema_version")
    if version != SWEEP_SCHEMA_VERSION:
        raise SweepError(
            f"{path}: sweep schema version {version!r}; this release reads {SWEEP_SCHEMA_VERSION}"
        )
    return meta


def _grid_knobs(meta: dict[str, str], path: Path) -> list[str]:
    try:
        grid = json.loads(meta.get("grid", ""))
    except json.JSONDecodeError:
        grid = None
    if not isinstance(grid, dict):
        raise SweepError(f"{path}: sweep_meta's grid is not a JSON object of knob → values")
    return [str(knob) for knob in grid]


def replay_command(result: SweepResult, row: dict[str, Any], output: str) -> str:
    """The `stepscope replay` that writes this point's trace alone: the same run as its point."""
    words = ["stepscope", "replay", str(result.meta.get("trace", "TRACE"))]
    for knob in result.knobs:
        value = row[knob]
        words += ["--set", f"{knob}={value if isinstance(value, str) else json.dumps(value)}"]
    schedulers = result.meta.get("scheduler", "").split(", ")
    custom = [name for name in schedulers if name and not name.startswith(BUILT_IN_SCHEDULERS)]
    if custom:
        module, _, name = custom[0].rpartition(".")
        words += ["--scheduler", custom[0] if ":" in custom[0] else f"{module}:{name}"]
    return shlex.join([*words, "-o", output])


def seconds_problem(problem: str, *, windowed: bool) -> str:
    """Why a sweep's seconds are NULL, from its `fit_problem`."""
    return problem if windowed else f"the step-time fit is poor ({problem})"
