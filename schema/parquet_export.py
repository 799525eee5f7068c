"""Reading a Parquet export folder: its manifest, and each table as one Arrow dataset.

The layout: `<table>/trace=<name>/part-0.parquet` for every logical table (its name
without the `_`), the trace's identity columns at the end of each file, and
`stepscope_export.json` naming the export's schema version and every table's columns.
The files are read by pyarrow, never by SQL: the connection that queries them keeps
DuckDB's file access off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from .trace_error import TraceError

MANIFEST = "stepscope_export.json"
EXPORT_SCHEMA_VERSIONS = frozenset({1})
IDENTITY_COLUMNS = ("engine", "host", "rank", "trace_created_at")
"""Columns an export adds to every table; `trace` is the hive partition."""

_PARTITIONING = ds.partitioning(pa.schema([("trace", pa.string())]), flavor="hive")


def read_manifest(folder: Path) -> dict[str, Any]:
    """The export's manifest, once its schema version is one this reader knows."""
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TraceError(f"{path}: not a readable export manifest ({error})") from None
    version = manifest.get("export_schema_version") if isinstance(manifest, dict) else None
    if version not in EXPORT_SCHEMA_VERSIONS:
        raise TraceError(
            f"{path}: export schema version {version!r} is not one this stepscope reads "
            f"(it reads {', '.join(map(str, sorted(EXPORT_SCHEMA_VERSIONS)))})"
        )
    assert isinstance(manifest, dict)
    return manifest


def table_dataset(folder: Path, table: str) -> ds.Dataset | None:
    """The logical table `table` (e.g. `_steps`) of every exported trace (None: not exported)."""
    path = folder / table.removeprefix("_")
    if not path.is_dir():
        return None
    try:
        return ds.dataset(path, format="parquet", partitioning=_PARTITIONING)
    except (OSError, pa.ArrowInvalid) as error:
        raise TraceError(f"{path}: not a readable Parquet table ({error})") from None


def export_trace_names(folder: Path) -> list[str]:
    """The traces exported into `folder`, by name, sorted: those with a `meta` partition."""
    read_manifest(folder)
    meta = table_dataset(folder, "_meta")
    if meta is None:
        raise TraceError(f"{folder}: a Parquet export without its meta table")
    names = set()
    for fragment in meta.get_fragments():
        name = ds.get_partition_keys(fragment.partition_expression).get("trace")
        if isinstance(name, str):
            names.add(name)
    if not names:
        raise TraceError(f"{folder}: a Parquet export of no traces")
    return sorted(names)


def export_meta(folder: Path) -> dict[str, dict[str, str]]:
    """Each exported trace's `_meta`, by trace name."""
    meta = table_dataset(folder, "_meta")
    if meta is None:
        raise TraceError(f"{folder}: a Parquet export without its meta table")
    by_trace: dict[str, dict[str, str]] = {}
    for row in meta.to_table(columns=["trace", "key", "value"]).to_pylist():
        by_trace.setdefault(row["trace"], {})[row["key"]] = row["value"]
    return by_trace
