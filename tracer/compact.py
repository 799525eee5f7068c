"""Rewrites a finished trace into a fresh file, the same tables in fewer bytes.

While recording, each checkpoint compresses the rows written since the last one,
so a long trace ends up as many part-filled segments plus the blocks earlier
checkpoints freed. Copied table by table into a new file, every column is
compressed in full row groups and no block is free; and `_requests` is stored as
`_request_rows`: a prompt that begins with a prefix other prompts share keeps a
reference to it (stored once, in `_prompt_prefixes`) and its own tokens, behind a
view of the old name that rebuilds every prompt. The copy
replaces the trace in one rename, so a reader or a crash sees either the old file
or the new one, never part of either.

Its memory does not grow with the trace: DuckDB works within `MEMORY_LIMIT`, spilling
to a folder beside the copy, and prompts are hashed from Arrow buffers a batch at a
time. A copy that does not fit keeps the trace as written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from stepscope.schema.ddl import comment_statements, table_specs
from stepscope.schema.sql_files import query

from .shared_prompts import TOKEN_BYTES, Prompt, references

logger = logging.getLogger("stepscope.tracer")

COMPACT_FROM_BYTES = 4 << 20
"""Smaller traces are left as written: the copy would save a few blocks at most."""

MEMORY_LIMIT = "128MB"
"""DuckDB's memory while compacting; what needs more spills to a folder beside the copy.
Unlimited, DuckDB keeps every block it reads and writes (up to 80 % of RAM), so the peak
would grow with the trace (`benchmarks/compact_memory.py`)."""

PROMPT_BATCH_ROWS = 256
"""Prompts hashed per Arrow batch: the batch's tokens are in memory at once."""

_ORIGINAL, _COPY = "recorded", "compacted"
"""The catalogs' names, as the `sql/shared_prompt_*.sql` files spell them."""
_REFERENCES = pa.schema(
    [
        ("request_index", pa.int32()),
        ("prompt_prefix_id", pa.int32()),
        ("prompt_prefix_len", pa.int32()),
    ]
)

Config = Mapping[str, str | bool | int | float | list[str]]


def compact(path: Path, config: Config) -> None:
    """Replace the closed trace at `path` by a compacted copy; on failure keep it as it is."""
    if path.stat().st_size < COMPACT_FROM_BYTES:
        return
    copy = path.with_name(path.name + ".compacting")
    try:
        _copy(path, copy, config)
        os.replace(copy, path)
    except (duckdb.Error, OSError) as error:
        logger.warning("stepscope: %s kept as written (compacting it failed: %s)", path, error)
        for leftover in (copy, copy.with_name(copy.name + ".wal")):
            with contextlib.suppress(OSError):
                leftover.unlink()


def _copy(path: Path, copy: Path, config: Config) -> None:
    """Copy every type, table, comment and row of `path` into the new file `copy`."""
    with contextlib.suppress(FileNotFoundError):
        copy.unlink()
    spill = copy.with_name(copy.name + ".tmp")
    limits = {"memory_limit": MEMORY_LIMIT, "temp_directory": str(spill)}
    con = duckdb.connect(":memory:", config={**config, **limits})
    try:
        con.execute("SET enable_progress_bar = false")
        # The catalogs' names are identifiers: constants spliced in.
        con.execute(f"ATTACH ? AS {_ORIGINAL} (READ_ONLY)", [str(path)])
        con.execute(f"ATTACH ? AS {_COPY}", [str(copy)])
        con.execute(f"COPY FROM DATABASE {_ORIGINAL} TO {_COPY} (SCHEMA)")
        tables = _tables(con)
        for table in sorted(tables - {"_requests"}):
            # A stored table's name, from the catalog: an identifier spliced in.
            con.execute(f'INSERT INTO {_COPY}.main."{table}" FROM {_ORIGINAL}.main."{table}"')
        if "_requests" in tables:
            _store_shared_prompts(con)
        con.execute(f"DETACH {_COPY}")
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {row[0] for row in con.execute(query(__package__, "recorded_tables")).fetchall()}


def _store_shared_prompts(con: duckdb.DuckDBPyConnection) -> None:
    """Replace the copy's `_requests` table by `_request_rows`, `_prompt_prefixes` and a view."""
    con.register("_shared_prompts", _prefix_table(con))
    con.execute(query(__package__, "shared_prompt_drop"))
    con.execute(f"USE {_COPY}")
    for name in ("shared_prompt_prefix_table", "shared_prompt_table", "shared_prompt_view"):
        con.execute(query(__package__, name))
    con.execute("USE memory")
    con.execute(query(__package__, "shared_prompt_prefixes"))
    con.execute(query(__package__, "shared_prompt_rows"))
    con.unregister("_shared_prompts")
    _comment_requests(con)
    mismatch = con.execute(query(__package__, "shared_prompt_mismatches")).fetchall()
    if mismatch:
        raise duckdb.ConversionException(f"request {mismatch[0][0]}: prompt not rebuilt exactly")


def _prefix_table(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """(request, shared prefix, tokens of it) for each request whose prompt begins with one.

    A prefix is named after the first request it was seen in, which takes the longest
    part of it any request takes.
    """
    columns: tuple[array[int], ...] = (array("i"), array("i"), array("i"))
    longest: dict[int, int] = {}
    for request_index, prefix_id, length in references(_recorded_prompts(con)):
        for column, value in zip(columns, (request_index, prefix_id, length), strict=True):
            column.append(value)
        longest[prefix_id] = max(length, longest.get(prefix_id, 0))
    for prefix_id, length in longest.items():
        for column, value in zip(columns, (prefix_id, prefix_id, length), strict=True):
            column.append(value)
    return pa.table([pa.array(c, pa.int32()) for c in columns], schema=_REFERENCES)


def _recorded_prompts(con: duckdb.DuckDBPyConnection) -> Iterator[tuple[int, Prompt | None]]:
    """(request index, prompt's bytes) of the recorded requests that may share a prefix, a
    few at a time, each prompt a view of the batch's Arrow buffer (no Python ints)."""
    reader = con.sql(query(__package__, "recorded_prompts")).to_arrow_reader(PROMPT_BATCH_ROWS)
    for batch in reader:
        yield from zip(batch.column(0).to_pylist(), _prompt_bytes(batch.column(1)), strict=True)


def _prompt_bytes(prompts: pa.ListArray) -> Iterator[memoryview | None]:
    """Each prompt's token ids as a view of native 8-byte integers (None for a NULL prompt)."""
    tokens = prompts.flatten().cast(pa.int64())
    if tokens.null_count:
        raise duckdb.ConversionException("a recorded prompt holds a NULL token id")
    start = tokens.offset * TOKEN_BYTES
    values = memoryview(tokens.buffers()[1])[start : start + len(tokens) * TOKEN_BYTES]
    lengths = pc.list_value_length(prompts).to_pylist()
    at = 0
    for length in lengths:
        if length is None:
            yield None
            continue
        yield values[at : at + length * TOKEN_BYTES]
        at += length * TOKEN_BYTES


def _comment_requests(con: duckdb.DuckDBPyConnection) -> None:
    """The view `_requests` carries the comments `tables.sql` gives the table."""
    spec = next(spec for spec in table_specs() if spec.name == "_requests")
    for statement in comment_statements(spec, "VIEW", f"{_COPY}.main."):
        con.execute(statement)
