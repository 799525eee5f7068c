"""One read-only connection over a diff's two traces: A as usual, B's tables and views in `b`.

Both files are attached read-only before file access is turned off and the
configuration locked, so a query is as sandboxed as on one trace. DuckDB binds a
view's body when it is queried, by the search path then, so B's views are created
with every table and view they name spelled out in B's catalog and schema.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
from stepscope.schema import TraceError, open_trace, view_infos
from stepscope.schema.sql_files import strip_comments

from .queries import query

_LOCK = (
    "SET enable_external_access = false",
    "SET autoload_known_extensions = false",
    "SET autoinstall_known_extensions = false",
    "SET lock_configuration = true",
)


def connect_both(a: Path, b: Path) -> duckdb.DuckDBPyConnection:
    """A's views and tables unqualified, B's as `b.<name>`; TraceError if either is no trace."""
    for path in (a, b):
        open_trace(path).close()  # the same checks and one-line errors as a lone trace
    con = duckdb.connect(":memory:")
    try:
        for catalog, path in (("trace_a", a), ("trace_b", b)):
            con.execute(f"ATTACH ? AS {catalog} (READ_ONLY)", [str(path)])
        for statement in _LOCK:
            con.execute(statement)
        _create_views(con, "trace_a", "main")
        _create_views(con, "trace_b", "b")
        con.execute("SET search_path = 'memory.main,trace_a.main'")
    except duckdb.Error as error:
        con.close()
        raise TraceError(f"{a} and {b}: cannot be opened together ({error})") from None
    return con


def _create_views(con: duckdb.DuckDBPyConnection, catalog: str, schema: str) -> None:
    """The reader's views over `catalog`'s tables, and those tables, in `memory.<schema>`."""
    con.execute(f"CREATE SCHEMA IF NOT EXISTS memory.{schema}")
    tables = [row[0] for row in con.execute(query("attached_tables"), [catalog]).fetchall()]
    for table in tables:
        con.execute(f'CREATE VIEW memory.{schema}."{table}" AS FROM {catalog}.main."{table}"')
    names = [info.name for info in view_infos()]
    pending = view_infos()
    while pending:
        failed = []
        for info in pending:
            body = _qualified(strip_comments(info.sql), schema, names)
            try:
                con.execute(f"CREATE VIEW memory.{schema}.{info.name} AS {body}")
            except duckdb.CatalogException:
                failed.append(info)
        if len(failed) == len(pending):
            raise TraceError(f"views cannot be created: {', '.join(v.name for v in failed)}")
        pending = failed


def _qualified(body: str, schema: str, views: list[str]) -> str:
    """`body` with its tables (`_steps`, ...) and the views it reads spelled out in `schema`."""
    body = re.sub(r"\b(_[a-z_]+)\b", rf"memory.{schema}.\1", body)
    pattern = r"\b(FROM|JOIN)\s+(" + "|".join(map(re.escape, views)) + r")\b"
    return re.sub(pattern, rf"\1 memory.{schema}.\2", body, flags=re.IGNORECASE)
