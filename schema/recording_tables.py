"""A recording folder's logical `_` tables: each a SELECT over its segments' Parquet files.

DuckDB reads the files itself (`read_parquet`), and `logical_select` casts each column to
the schema's type (enums are stored as text, token ids in 4 bytes or 8); a table no
segment holds a file of has no rows, and in a recording of an older version a column its
files lack reads as its "off" value, as in an older trace file. `_requests` is one row
per request with its last abort and grammar-ready step (`recording_requests.sql`), `_meta`
the trace's facts read at open (`recording_meta`), `_config` one segment's (every segment
holds the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from .ddl import logical_tables, table_specs
from .member_tables import literal
from .member_views import create_views, logical_select
from .recording_layout import (
    REQUEST_ABORTS,
    REQUEST_GRAMMARS,
    STORED_TABLES,
    Segment,
    holds_a_step,
    read_manifest,
    scan,
    writer_pid,
)
from .recording_meta import SegmentFacts, read_recording_meta
from .recording_paths import readable_folder, refuse_links
from .sql_files import query
from .trace_error import TraceError
from .version import RECORDING_VERSIONS, SCHEMA_VERSION

_META = pa.schema([("key", pa.string()), ("value", pa.string())])


@dataclass(frozen=True)
class Recording:
    """A recording folder as it was found when it was opened."""

    folder: Path
    """The folder, absolute (its files are read by these paths)."""
    manifest: dict[str, Any]
    """How it was recorded (`stepscope_recording.json`)."""
    segments: tuple[SegmentFacts, ...]
    """Its segments by first step; the oldest may have been deleted (retention)."""

    def files(self) -> list[Path]:
        """Every table's file in its segments, in the recording's order."""
        return [
            path
            for facts in self.segments
            for table in STORED_TABLES
            for path in facts.segment.files(table)
        ]


def recorded_tables(
    con: duckdb.DuckDBPyConnection, schema: str, given: Path
) -> tuple[Recording, dict[str, str], dict[str, str]]:
    """The recording `given`: what it holds, its `_meta`, and each logical table's SELECT
    (over views of its files, made in `schema`)."""
    folder = readable_folder(given)
    try:
        manifest = read_manifest(folder)
    except ValueError as error:
        raise TraceError(str(error)) from None
    segments = scan(folder)
    refuse_links(given, folder, segments)
    if not holds_a_step(segments):
        if writer_pid(folder) is None:
            raise TraceError(f"{given}: a recording that holds no step: it stopped before any")
        raise TraceError(f"{given}: a recording with no step in it yet; try again in a moment")
    read = read_recording_meta(con, segments)
    current = _check_version(given, read.meta)
    unify = read.meta.get("redacted") != "false"
    create_views(con, schema, _request_views(segments, unify=unify, current=current))
    meta = pa.table({"key": list(read.meta), "value": list(read.meta.values())}, _META)
    con.from_arrow(meta).create(f"{schema}.meta")  # a table: every cursor reads it
    tables = {
        table: _select(schema, table, segments, unify=unify, current=current)
        for table in logical_tables()
    }
    return Recording(folder, manifest, read.segments), read.meta, tables


def _select(
    schema: str, table: str, segments: Sequence[Segment], *, unify: bool, current: bool
) -> str:
    """The logical table's SELECT: from the recording's views of it, or its files."""
    if table == "_meta":
        return logical_select(table, ("key", "value"), f"{schema}.meta", cast=True)
    if table == "_requests":
        return _all_columns(table, f"{schema}.requests")
    files = _files(segments, table)
    if table == "_config":
        files = files[:1]
    if not files:
        return logical_select(table, (), None, cast=True)
    have = _stored_columns(table, files, current=current)
    return logical_select(table, have, read_parquet(files, unify=unify), cast=True)


def _all_columns(table: str, source: str) -> str:
    """`table` from `source`, which holds every column of today's schema, each cast to its
    type."""
    return logical_select(table, _todays_columns(table), source, cast=True)


def _todays_columns(table: str) -> list[str]:
    (spec,) = (spec for spec in table_specs() if spec.name == table)
    return [column[0] for column in spec.columns]


def _stored_columns(table: str, files: Sequence[str], *, current: bool) -> Sequence[str]:
    """The columns `table`'s files hold: today's, or in an older recording its first file's
    (one recording is of one version; a column a later version added reads as "off")."""
    if current:
        return _todays_columns(table)
    names: list[str] = pq.read_schema(files[0]).names
    return names


def _request_views(segments: Sequence[Segment], *, unify: bool, current: bool) -> dict[str, str]:
    """`requests`, one row per request (`recording_requests.sql`), and the views of the
    stored requests, aborts and grammar-ready steps it reads."""
    files = _files(segments, "_requests")
    aborts = _files(segments, REQUEST_ABORTS)
    grammars = _files(segments, REQUEST_GRAMMARS)
    return {
        "stored_requests": logical_select(
            "_requests",
            _stored_columns("_requests", files, current=current),
            read_parquet(files, unify=unify),
            cast=True,
        )
        if files
        else logical_select("_requests", (), None, cast=True),
        "request_aborts": _every_row(aborts)
        if aborts
        else query(__package__, "recording_no_aborts"),
        "request_grammars": _every_row(grammars)
        if grammars
        else query(__package__, "recording_no_grammars"),
        "requests": query(__package__, "recording_requests"),
    }


def _every_row(files: Sequence[str]) -> str:
    """The files' rows, each with its file's path and its number in it."""
    # The paths are quoted as SQL literals (`read_parquet`): spliced in.
    return f"SELECT * FROM {read_parquet(files, unify=False, numbered=True)}"


def _files(segments: Sequence[Segment], table: str) -> list[str]:
    return [str(path) for segment in segments for path in segment.files(table)]


def read_parquet(files: Sequence[str], *, unify: bool, numbered: bool = False) -> str:
    """The table function reading `files` as one table; with `numbered`, each row with its
    file's path and its number in it.

    Without `unify` DuckDB takes the columns' types from the first file and casts the
    others' to them, reading each file's footer only as it scans it: a closed segment's
    4-byte token ids and a part's 8-byte ones hold the same values. With it, every footer
    is read whenever a query is planned and each column takes its widest type: a redacted
    recording's pseudonyms fill 8 bytes, yet a segment holding none was stored in 4.
    """
    listed = ", ".join(literal(path) for path in files)
    options = f"union_by_name = {str(unify).lower()}, hive_partitioning = false"
    if numbered:
        options += ", filename = true, file_row_number = true"
    return f"read_parquet([{listed}], {options})"


def _check_version(given: Path, meta: dict[str, str]) -> bool:
    """Refuse a version this stepscope cannot read; whether it is today's."""
    version = meta.get("schema_version", "")
    if not version.isdigit():
        raise TraceError(f"{given}: a recording without a schema_version in its meta")
    if int(version) not in RECORDING_VERSIONS:
        newer = int(version) > SCHEMA_VERSION
        raise TraceError(
            f"{given}: a recording of trace schema version {version}; this stepscope reads "
            f"recordings of versions {min(RECORDING_VERSIONS)} to {SCHEMA_VERSION}"
            + ("; upgrade stepscope" if newer else "")
        )
    return int(version) == SCHEMA_VERSION
