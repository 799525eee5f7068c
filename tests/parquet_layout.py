"""Writing a trace as a Parquet export, in the export layout, for the readers' tests.

`<out>/<table>/trace=<name>/part-0.parquet` (zstd) per logical table, ENUMs as text, the
identity columns (engine, host, rank, trace_created_at) last, and the manifest
`stepscope_export.json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from stepscope.schema import logical_tables, open_trace

_IDENTITY_TYPES = [
    ["engine", "VARCHAR"],
    ["host", "VARCHAR"],
    ["rank", "INTEGER"],
    ["trace_created_at", "VARCHAR"],
]


def write_export(trace_path: Path, out: Path, name: str | None = None) -> None:
    """Export one trace into `out` (other traces' partitions are kept)."""
    name = name or trace_path.stem
    tables = {}
    with open_trace(trace_path) as trace:
        meta = trace.meta
        for table in logical_tables():
            relation = trace.sql(f"SELECT * FROM {table}")
            tables[table] = (relation.to_arrow_table(), [str(t) for t in relation.types])
    identity = {
        "engine": pa.string(),
        "host": pa.string(),
        "rank": pa.int32(),
        "trace_created_at": pa.string(),
    }
    rank = meta.get("dp_rank")
    values = [meta.get("engine"), meta.get("host"), None if rank is None else int(rank)]
    values.append(meta.get("created_at"))
    manifest_tables = {}
    for table, (arrow, types) in tables.items():
        columns = [
            [column, "VARCHAR" if sql_type.startswith("ENUM") else sql_type]
            for column, sql_type in zip(arrow.column_names, types, strict=True)
        ]
        manifest_tables[table.removeprefix("_")] = columns + _IDENTITY_TYPES
        arrow = _enums_as_text(arrow)
        for (column, arrow_type), value in zip(identity.items(), values, strict=True):
            arrow = arrow.append_column(column, pa.array([value] * arrow.num_rows, arrow_type))
        folder = out / table.removeprefix("_") / f"trace={name}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(arrow, folder / "part-0.parquet", compression="zstd")
    manifest = {
        "export_schema_version": 1,
        "trace_schema_version": int(meta["schema_version"]),
        "tables": manifest_tables,
    }
    (out / "stepscope_export.json").write_text(json.dumps(manifest, indent=1))


def _enums_as_text(table: pa.Table) -> pa.Table:
    for index, column in enumerate(table.schema):
        if pa.types.is_dictionary(column.type):
            table = table.set_column(index, column.name, table.column(index).cast(pa.string()))
    return table
