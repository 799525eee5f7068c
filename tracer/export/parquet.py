"""A trace as Parquet: one zstd file per logical table, in a hive partition named after the trace.

The layout, `OUT/<table>/trace=<name>/part-0.parquet` plus `OUT/stepscope_export.json`,
makes a folder of many traces' exports one dataset that DuckDB, Polars, Spark or Trino
read as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from stepscope.schema import SCHEMA_VERSION, Trace, logical_tables, open_trace
from stepscope.schema.ddl import table_specs
from stepscope.schema.sql_files import query
from stepscope.schema.step_window import WHOLE, StepWindow

from ..held_signals import signals_held
from .identity import TraceIdentity
from .output import ExportError, scratch_folder, writing
from .parquet_folder import ExportFolder, ExportSchema, partition_folder

_BATCH_ROWS = 1 << 17
IDENTITY_COLUMNS = ("engine", "host", "rank", "trace_created_at")
_PART = "part-0.parquet"


@dataclass(frozen=True)
class ParquetExport:
    """What an export wrote: the folder, the trace's name, and rows per table."""

    out_dir: Path
    trace: str
    rows: dict[str, int]

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def export_parquet(trace_path: Path, out_dir: Path, window: StepWindow = WHOLE) -> ParquetExport:
    """Write every logical table of the trace into `out_dir`, replacing its earlier export:
    all its rows, or those of the steps in `window` (`step_window`)."""
    with open_trace(trace_path, window) as trace:
        identity = TraceIdentity.of(trace)
        folder = ExportFolder.prepare(out_dir)
        try:
            with scratch_folder(out_dir, ".stepscope-export-") as scratch:
                rows, columns = _write_tables(trace, identity, scratch)
                schema = ExportSchema(SCHEMA_VERSION, columns)
                folder.check_schema(schema)
                with signals_held():  # a stop now would leave some tables replaced, not all
                    folder.replace_partitions(scratch, identity.name, list(columns))
                    folder.write_schema(schema)
        except BaseException:
            folder.undo_creation()
            raise
    return ParquetExport(out_dir, identity.name, rows)


def _write_tables(
    trace: Trace, identity: TraceIdentity, scratch: Path
) -> tuple[dict[str, int], dict[str, list[tuple[str, str]]]]:
    """Write each table under `scratch`; its rows and (column, DuckDB type) list, by table."""
    rows: dict[str, int] = {}
    columns: dict[str, list[tuple[str, str]]] = {}
    for table in logical_tables():
        name = table.removeprefix("_")
        path = scratch / name / partition_folder(identity.name) / _PART
        relation = trace.sql(
            query(__package__, "export_table"),
            {
                "table": table,
                "engine": identity.engine,
                "host": identity.host,
                "rank": identity.rank,
                "created_at": identity.created_at,
            },
        ).select(*(duckdb.ColumnExpression(column) for column in _column_order(table)))
        columns[name] = [
            (column, _exported_type(str(sql_type)))
            for column, sql_type in zip(relation.columns, relation.types, strict=True)
        ]
        rows[name] = _write_parquet(relation.to_arrow_reader(_BATCH_ROWS), path)
    return rows, columns


def _column_order(table: str) -> list[str]:
    """The columns in `tables.sql` order, whatever order an older trace's reader gives, then the
    identity columns."""
    (spec,) = [spec for spec in table_specs() if spec.name == table]
    return [name for name, _, _ in spec.columns] + list(IDENTITY_COLUMNS)


def _write_parquet(reader: pa.RecordBatchReader, path: Path) -> int:
    """Stream the batches into one zstd Parquet file, ENUMs as plain strings; rows written."""
    schema = pa.schema([_plain_field(field) for field in reader.schema])
    written = 0
    try:
        path.parent.mkdir(parents=True)
        with pq.ParquetWriter(path, schema, compression="zstd") as writer:
            for batch in reader:
                writer.write_batch(_plain_batch(batch, schema))
                written += batch.num_rows
    except OSError as error:
        raise writing(path, error) from None
    return written


def _plain_field(field: pa.Field) -> pa.Field:
    """A DuckDB ENUM arrives as a dictionary of strings: it is written as a string column."""
    if pa.types.is_dictionary(field.type):
        return field.with_type(field.type.value_type)
    return field


def _plain_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    arrays = [column.cast(field.type) for column, field in zip(batch.columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


_ENUM = re.compile(r"ENUM\((?:'[^']*'(?:, )?)*\)")


def _exported_type(sql_type: str) -> str:
    """The type a column has in the Parquet files: an ENUM (in a STRUCT too) becomes VARCHAR."""
    return _ENUM.sub("VARCHAR", sql_type)


__all__ = ["ExportError", "ParquetExport", "export_parquet"]
