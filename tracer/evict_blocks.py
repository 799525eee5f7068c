"""Drop the blocks a DuckDB connection holds loaded but has on disk.

DuckDB keeps every block it writes in its buffer pool until memory runs short, so a
connection that writes a whole trace comes to hold about the whole file in memory
(`benchmarks/RESULTS.md`, long_recording). A memory limit below what it
holds evicts every block that is on disk; the default limit is then restored. Rows
committed but not yet written to the file would be copied to a temporary file
instead, so nothing is evicted while there are any.
"""

from __future__ import annotations

import duckdb
from stepscope.schema.sql_files import query

_EVICT = "SET memory_limit = '1MB'"
_RESTORE_LIMIT = "RESET memory_limit"
"""Back to DuckDB's default: the trace writer sets no limit of its own."""


def evict_blocks(con: duckdb.DuckDBPyConnection) -> None:
    """Evict every unpinned block `con`'s database has on disk (none if rows are unwritten)."""
    [(unwritten,)] = con.execute(query(__package__, "unwritten_bytes")).fetchall()
    if unwritten:
        return
    try:
        con.execute(_EVICT)
    except duckdb.OutOfMemoryException:
        pass  # some blocks were pinned: the others were evicted all the same
    finally:
        con.execute(_RESTORE_LIMIT)
