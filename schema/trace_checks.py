"""The checks a file passes before it is read as a trace, each failure one line naming it.

It exists and is a file; it is a DuckDB database (else: a workload, an empty file, or
something else); it is as long as its blocks say; its `_meta` names a schema version
this stepscope reads.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from .lockdown import connect_locked
from .trace_error import TraceError
from .trace_file import check_length, damaged, is_file_error, not_duckdb, read_every_block
from .version import SCHEMA_VERSION, SUPPORTED_VERSIONS


def checked_meta(path: Path) -> dict[str, str]:
    """A trace file's `_meta`, once the file passes every check."""
    con = checked_connection(path)
    try:
        return read_meta(con, path)
    finally:
        con.close()


def check_every_block(path: Path) -> None:
    """Read every stored byte, so a damaged block is an error now, not a missed difference."""
    con = checked_connection(path)
    try:
        problem = read_every_block(con, path)
    finally:
        con.close()
    if problem is not None:
        raise TraceError(problem)


def checked_connection(path: Path) -> duckdb.DuckDBPyConnection:
    """The file opened read-only under the lockdown, once it reads as a whole DuckDB file."""
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace")
    problem = not_duckdb(path)
    if problem is not None:
        raise TraceError(problem)
    try:
        con = connect_locked(path)
    except duckdb.Error as error:
        raise TraceError(damaged(path, error)) from None
    try:
        problem = check_length(con, path)
    except duckdb.Error as error:
        problem = damaged(path, error)
    if problem is not None:
        con.close()
        raise TraceError(problem)
    return con


def read_meta(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    """`_meta` as a dict, when it names a schema version this stepscope reads."""
    try:
        rows = con.table("_meta").select("key", "value").fetchall()
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
