"""A folder of Parquet exports: its versioned schema file and each trace's partitions."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .output import ExportError, atomic_file, writing

EXPORT_SCHEMA_VERSION = 1
SCHEMA_FILE = "stepscope_export.json"


@dataclass(frozen=True)
class ExportSchema:
    """`stepscope_export.json`: the export and trace schema versions, each table's columns."""

    trace_schema_version: int
    tables: dict[str, list[tuple[str, str]]]

    def as_json(self) -> dict[str, Any]:
        return {
            "export_schema_version": EXPORT_SCHEMA_VERSION,
            "trace_schema_version": self.trace_schema_version,
            "partitioning": {"trace": "VARCHAR"},
            "tables": {table: [list(c) for c in columns] for table, columns in self.tables.items()},
        }

    def text(self) -> str:
        """The JSON, one line per table, so the file reads as the schema's documentation."""
        document = self.as_json()
        tables = ",\n".join(
            f"    {json.dumps(table)}: {json.dumps(columns)}"
            for table, columns in document.pop("tables").items()
        )
        head = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in document.items())
        return f'{{\n{head},\n  "tables": {{\n{tables}\n  }}\n}}\n'


def partition_folder(trace_name: str) -> str:
    """The hive partition of a trace: `trace=<name>`, percent-encoding what a path cannot hold."""
    return f"trace={quote(trace_name, safe=' +,;@')}"


@dataclass
class ExportFolder:
    """An export folder, new or holding earlier exports of the same schema."""

    path: Path
    created: bool

    @staticmethod
    def check(path: Path) -> None:
        """ExportError unless `path` is new, empty or a folder of stepscope Parquet exports."""
        if path.exists() and not path.is_dir():
            raise ExportError(f"{path}: exists and is not a folder; name a folder for --parquet")
        if path.is_dir() and not (path / SCHEMA_FILE).is_file() and any(_visible(path)):
            raise ExportError(
                f"{path}: a folder that is not a stepscope Parquet export (no {SCHEMA_FILE}); "
                "name a new or empty folder"
            )

    @classmethod
    def prepare(cls, path: Path) -> ExportFolder:
        """Check `path` can hold this export, creating it when it does not exist."""
        cls.check(path)
        if path.is_dir():
            return cls(path, created=False)
        try:
            path.mkdir(parents=True)
        except OSError as error:
            raise writing(path, error) from None
        return cls(path, created=True)

    def check_schema(self, schema: ExportSchema) -> None:
        """Refuse to mix exports of different schemas in one dataset."""
        current = self._current_schema()
        if current is not None and current != schema.as_json():
            raise ExportError(
                f"{self.path}: holds exports of another schema (export schema "
                f"{current.get('export_schema_version')}, trace schema "
                f"{current.get('trace_schema_version')}); export into a new folder"
            )

    def replace_partitions(self, scratch: Path, trace_name: str, tables: list[str]) -> None:
        """Move the trace's new partitions in, each replacing the old one by renames."""
        partition = partition_folder(trace_name)
        old = scratch / ".replaced"
        try:
            old.mkdir()
            for table in tables:
                final = self.path / table / partition
                final.parent.mkdir(exist_ok=True)
                if final.exists():
                    os.rename(final, old / table)
                os.rename(scratch / table / partition, final)
        except OSError as error:
            raise writing(self.path, error) from None

    def write_schema(self, schema: ExportSchema) -> None:
        if self._current_schema() == schema.as_json():
            return
        target = self.path / SCHEMA_FILE
        try:
            with atomic_file(target) as temporary:
                temporary.write_text(schema.text())
        except OSError as error:
            raise writing(target, error) from None

    def undo_creation(self) -> None:
        """Remove the folder again if this export made it and put nothing in it."""
        if self.created and not any(self.path.iterdir()):
            shutil.rmtree(self.path, ignore_errors=True)

    def _current_schema(self) -> dict[str, Any] | None:
        path = self.path / SCHEMA_FILE
        if not path.is_file():
            return None
        try:
            current = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise ExportError(f"{path}: not a readable export schema ({error})") from None
        if not isinstance(current, dict):
            raise ExportError(f"{path}: not a readable export schema (not a JSON object)")
        return current


def _visible(folder: Path) -> list[Path]:
    return [entry for entry in folder.iterdir() if not entry.name.startswith(".")]
