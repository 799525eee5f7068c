"""The checks a file passes before it is read as a trace, each failure one line naming it.

It exists and is a file; it is a DuckDB database (else: a workload, an empty file, or
something else); it is as long as its blocks say; its `_meta` names a schema version
this stepscope reads. The file is checked where it is attached, on the reader's own
connection.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from .ddl import logical_tables
from .set_members import not_one_trace
from .sql_files import query
from .trace_error import TraceError
from .trace_file import check_length, damaged, is_file_error, not_duckdb, read_every_block
from .version import SCHEMA_VERSION, SUPPORTED_VERSIONS


def attach_checked(con: duckdb.DuckDBPyConnection, database: str, path: Path) -> dict[str, str]:
    """Attach the trace file `path` read-only as `database`, once it reads as a whole DuckDB
    file: its `_meta`, when that names a schema version this stepscope reads."""
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(not_one_trace(path))
    problem = not_duckdb(path)
    if problem is not None:
        raise TraceError(problem)
    try:
        # The alias is an identifier: spliced in.
        con.execute(f"ATTACH ? AS {database} (READ_ONLY)", [str(path)])
        problem = check_length(con, path, database)
    except duckdb.Error as error:
        problem = damaged(path, error)
    if problem is not None:
        raise TraceError(problem)
    return _read_meta(con, database, path)


def check_every_block(con: duckdb.DuckDBPyConnection, database: str, path: Path) -> None:
    """Read every stored byte, so a damaged block is an error now, not a missed difference."""
    problem = read_every_block(con, path, database)
    if problem is not None:
        raise TraceError(problem)


def check_every_table(con: duckdb.DuckDBPyConnection) -> None:
    """Read every column of every logical table to its last byte (a recording's every file):
    DuckDB's error names a file that fails."""
    for table in logical_tables():
        con.execute(query(__package__, "read_table"), [table]).fetchall()


def _read_meta(con: duckdb.DuckDBPyConnection, database: str, path: Path) -> dict[str, str]:
    """`_meta` as a dict, when it names a schema version this stepscope reads."""
    try:
        rows = con.table(f"{database}.main._meta").select("key", "value").fetchall()
    except duckdb.Error as error:
        if is_file_error(error):
            raise TraceError(damaged(path, error)) from None
        raise TraceError(
            f"{path}: a DuckDB file, but not a stepscope trace (no _meta table)"
        ) from None
    meta = dict(rows)
    version = meta.get("schema_version", "")
    if not version.isdigit():
        raise TraceError(f"{path}: not a stepscope trace (no schema_version in _meta)")
    if int(version) not in SUPPORTED_VERSIONS:
        newer = int(version) > SCHEMA_VERSION
        raise TraceError(
            f"{path}: trace schema version {version} is "
            + ("newer than this stepscope reads" if newer else "not one this stepscope reads")
            + f" (it reads {', '.join(map(str, sorted(SUPPORTED_VERSIONS)))}); "
            + ("upgrade stepscope" if newer else "re-record the trace")
        )
    return meta
