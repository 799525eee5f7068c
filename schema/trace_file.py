"""What is wrong with a file that does not read as a trace, said in a user's terms.

DuckDB checksums every block (headers, catalog, table data) and checks a block
only when it reads it, so a damaged block shows up at the first query that
touches it; `read_every_block` touches them all, for commands whose answer is
"nothing differs".
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import duckdb

from .sql_files import query

_DUCKDB_MAGIC = b"DUCK"
_MAGIC_OFFSET = 8
"""DuckDB's main header: an 8-byte checksum, then the magic bytes."""
_DUCKDB_HEADER_BYTES = 3 * 4096
"""DuckDB's main header and its two database headers, before the first block."""
_WORKLOAD_PEEK_BYTES = 1 << 20
_LOCK_HOLDER = re.compile(r"Conflicting lock is held in .* \(PID (\d+)\)")
"""The process DuckDB names as holding a file's write lock."""

_FILE_ERRORS = (
    duckdb.IOException,
    duckdb.InternalException,
    duckdb.SerializationException,
    duckdb.FatalException,
)
"""DuckDB errors that come from the file's bytes, not from a query's text."""


def is_duckdb_file(path: Path) -> bool:
    """Whether `path` is a file that starts as a DuckDB database does (its magic bytes)."""
    try:
        with path.open("rb") as file:
            return _has_duckdb_magic(file.read(_MAGIC_OFFSET + len(_DUCKDB_MAGIC)))
    except OSError:
        return False


def _has_duckdb_magic(head: bytes) -> bool:
    return head[_MAGIC_OFFSET : _MAGIC_OFFSET + len(_DUCKDB_MAGIC)] == _DUCKDB_MAGIC


def not_duckdb(path: Path) -> str | None:
    """Why `path` is not a trace when it is not a DuckDB file at all (None when it is one)."""
    with path.open("rb") as file:
        head = file.read(_WORKLOAD_PEEK_BYTES)
    if _has_duckdb_magic(head):
        return None
    if _is_workload(head):
        return (
            f"{path}: a workload, not a trace: record it first "
            f"(stepscope record {path} -o trace.duckdb)"
        )
    if not head:
        return f"{path}: an empty file, not a trace"
    return f"{path}: not a readable trace (not a DuckDB file)"


def _is_workload(head: bytes) -> bool:
    """Whether the bytes read as a JSON or TOML table naming requests or a config."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    for parse in (json.loads, tomllib.loads):
        try:
            document = parse(text)
        except ValueError:
            continue
        return isinstance(document, dict) and bool({"requests", "config"} & set(document))
    return False


def is_file_error(error: duckdb.Error) -> bool:
    """Whether DuckDB failed on the file's bytes (a damaged or cut file), not on a query."""
    return type(error) is duckdb.Error or isinstance(error, _FILE_ERRORS)


def damaged(path: Path, error: duckdb.Error, table: str | None = None) -> str:
    """The one-line message for a file DuckDB could not read (in `table`, when known)."""
    detail = first_line(error)
    if "Could not read enough bytes" in detail:
        return cut_short(path)
    if "Could not set lock on file" in detail:
        return being_written(path, detail)
    where = f"its table {table}" if table else "it"
    return f"{path}: a damaged trace, {where} cannot be read ({detail}); record or copy it again"


def being_written(path: Path, detail: str) -> str:
    """A trace another process holds open for writing: not damaged, but not readable now."""
    pid = _LOCK_HOLDER.search(detail)
    holder = f"process {pid.group(1)}" if pid else "another process"
    return (
        f"{path}: a trace being written: {holder} holds it open (a recording still "
        "running?), and DuckDB lets no other process read a file while one writes it "
        "(nothing is wrong with the file): read it once the recording has ended, or record "
        "into a folder to read a recording while it runs (stepscope record ... --segment "
        "5000steps, or STEPSCOPE_TRACE_SEGMENT for vLLM)"
    )


def cut_short(path: Path) -> str:
    return (
        f"{path}: a truncated trace: the file ends at byte {path.stat().st_size} but its "
        "blocks go on past it (an unfinished copy?); copy it again in full"
    )


def check_length(con: duckdb.DuckDBPyConnection, path: Path, database: str | None) -> str | None:
    """Why the file of `database` (the current one when None) is too short for the blocks its
    catalog points at (None when it is not).

    Every used block lies below the header's block count, so a file that long is whole
    without looking at the tables (whose storage info grows with their rows).
    """
    ((block_size, total_blocks),) = con.execute(
        query(__package__, "file_blocks"), [database]
    ).fetchall()
    if path.stat().st_size >= _DUCKDB_HEADER_BYTES + int(block_size) * int(total_blocks):
        return None
    metadata = con.execute(query(__package__, "metadata_blocks"), [database]).fetchall()
    blocks = {row[0] for row in metadata}
    for table in stored_tables(con, database):
        rows = con.execute(query(__package__, "used_blocks"), [_named(database, table)])
        blocks.update(row[0] for row in rows.fetchall())
    needed = _DUCKDB_HEADER_BYTES + int(block_size) * (max(blocks, default=-1) + 1)
    return cut_short(path) if path.stat().st_size < needed else None


def stored_tables(con: duckdb.DuckDBPyConnection, database: str | None = None) -> list[str]:
    """The tables stored in `database` (the current one when None), by name."""
    rows = con.execute(query(__package__, "stored_tables"), [database]).fetchall()
    return [row[0] for row in rows]


def read_every_block(
    con: duckdb.DuckDBPyConnection, path: Path, database: str | None
) -> str | None:
    """Read every column of every table of `database` (the current one when None): why the file
    is damaged, or None when all of it reads."""
    for table in stored_tables(con, database):
        try:
            con.execute(query(__package__, "read_table"), [_named(database, table)]).fetchall()
        except duckdb.Error as error:
            return damaged(path, error, table)
    return None


def _named(database: str | None, table: str) -> str:
    return table if database is None else f"{database}.main.{table}"


def first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
