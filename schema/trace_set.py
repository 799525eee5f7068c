"""Many traces read as one: every view and `_` table with `trace` and `rank` first.

Each trace gets a schema of its own, `trace_<index>` (`TraceReader`), over its
attached file or over its partition of a Parquet export; a top-level view of each
name is the UNION ALL of the traces' in the order given, each trace's rows in its
view's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from .ddl import logical_tables
from .member_tables import exported_tables, literal
from .parquet_export import export_meta
from .reader import TraceReader
from .set_members import Member, find_members
from .sql_files import query
from .step_window import WHOLE, StepWindow
from .trace_error import TraceError
from .version import SCHEMA_VERSION, SUPPORTED_VERSIONS
from .view_infos import views_in_order


@dataclass(frozen=True)
class SetTrace:
    """A trace of the set: its name, where it is read from, its `_meta`, its DP rank."""

    name: str
    path: Path
    in_export: bool
    meta: dict[str, str] = field(compare=False)
    rank: int | None


class TraceSet(TraceReader):
    """Traces, folders of traces (trace files and recordings) and Parquet exports opened as
    one (see `TraceReader`)."""

    LIST_VIEWS = "stepscope sql PATH..."

    def __init__(self, paths: Sequence[str | Path], window: StepWindow = WHOLE) -> None:
        members = find_members([Path(path) for path in paths])
        super().__init__(None)
        self.window = window
        """The steps read of each trace (`step_window`); a trace may hold none of them."""
        self._open(lambda: self._add_traces(members))

    def _add_traces(self, members: Sequence[Member]) -> None:
        self._export_metas: dict[Path, dict[str, dict[str, str]]] = {}
        self.traces = tuple(self._add(index, member) for index, member in enumerate(members))
        _create_union_views(self._con, self.traces)
        if not self.window.whole:
            self._check_window()

    def _check_window(self) -> None:
        """A window no trace of the set holds a step of is an error, not empty answers."""
        ((count, _, _),) = self.execute(query(__package__, "step_range")).fetchall()
        if count:
            return
        start, end = self.window.from_step, self.window.to_step
        given = [f"--from-step {start}"] if start else []
        given += [] if end is None else [f"--to-step {end}"]
        asked = " ".join(given)
        steps = f"from {start} on" if end is None else f"of {start}..{end}"
        raise TraceError(
            f"{asked}: no trace of the set holds a step {steps} "
            "(`stepscope info FOLDER` lists the steps each holds)"
        )

    @property
    def names(self) -> list[str]:
        return [trace.name for trace in self.traces]

    def _add(self, index: int, member: Member) -> SetTrace:
        """Give the trace its schema, `trace_<index>`, and read its identity."""
        if member.in_export:
            meta = self._export_meta(member.path).get(member.name, {})
            _check_version(member, meta)
            tables = exported_tables(self._con, f"export_{index}", member.path, member.name)
        else:
            read = self._read_trace(f"file_{index}", member.path)
            meta, tables = read.meta, read.tables
        tables = self._create_window(f"trace_{index}", tables, self.window)
        self._add_schema(f"trace_{index}", tables, f"{member.path}: trace {member.name}", meta)
        return SetTrace(member.name, member.path, member.in_export, meta, _rank(member, meta))

    def _export_meta(self, folder: Path) -> dict[str, dict[str, str]]:
        if folder not in self._export_metas:
            self._export_metas[folder] = export_meta(folder)
        return self._export_metas[folder]


def open_traces(paths: Sequence[str | Path], window: StepWindow = WHOLE) -> TraceSet:
    """Open traces, folders of traces and Parquet exports as one set (see `TraceSet`), all
    of each or the steps of `window`."""
    return TraceSet(paths, window)


def _create_union_views(con: duckdb.DuckDBPyConnection, traces: Sequence[SetTrace]) -> None:
    """Each table and view at the top level: every trace's rows, `trace` and `rank` first."""
    for name in (*logical_tables(), *(info.name for info in views_in_order())):
        branches = " UNION ALL BY NAME ".join(
            f"(SELECT {literal(trace.name)} AS trace, "
            f"CAST({'NULL' if trace.rank is None else trace.rank} AS INTEGER) AS rank, * "
            f"FROM trace_{index}.{name})"
            for index, trace in enumerate(traces)
        )
        con.execute(f"CREATE VIEW main.{name} AS {branches}")


def _rank(member: Member, meta: dict[str, str]) -> int | None:
    """The trace's data-parallel rank (`_meta.dp_rank`; None when not one rank of many)."""
    rank = meta.get("dp_rank")
    if rank is None:
        return None
    if not rank.isdigit():
        raise TraceError(f"{member.path}: trace {member.name}: dp_rank {rank!r} is not a number")
    return int(rank)


def _check_version(member: Member, meta: dict[str, str]) -> None:
    version = meta.get("schema_version", "")
    if not version.isdigit() or int(version) not in SUPPORTED_VERSIONS:
        raise TraceError(
            f"{member.path}: trace {member.name} has schema version {version or 'none'}; "
            f"this stepscope reads {', '.join(map(str, sorted(SUPPORTED_VERSIONS)))} "
            f"(newest {SCHEMA_VERSION})"
        )
