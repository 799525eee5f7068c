"""The views over a Parquet export as Spark SQL: `python -m stepscope.schema.spark_views DIR`.

Spark reads the export where it lies (`parquet.`DIR/<table>``, hive partitions by
trace). Each `_` table at the top level is the whole dataset with `trace` and `rank`
first, for fleet-wide queries that Spark distributes; each trace gets a database,
`trace_<i>`, holding its partition of every table and every view Spark can run (see
`spark_dialect`), created while it is the current database so that the views' table
names resolve there; the top-level view of each name is the UNION ALL of the traces'.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from .ddl import logical_tables, table_specs
from .parquet_export import export_meta, export_trace_names, read_manifest
from .spark_dialect import spark_sql
from .sql_files import names, query, strip_comments
from .view_infos import views_in_order

_CONSTRAINT = re.compile(r"\s+(PRIMARY KEY|NOT NULL|UNIQUE)\b.*$")
_SPARK_TYPES = {"INTEGER": "INT", "VARCHAR": "STRING", "BIGINT[]": "ARRAY<BIGINT>"}
_SPARK_TYPES |= {"INTEGER[]": "ARRAY<INT>"}
_SPARK_TYPES |= {
    "STRUCT(type attention_type, sliding_window INTEGER, attention_chunk_size INTEGER)[]": (
        "ARRAY<STRUCT<type: STRING, sliding_window: INT, attention_chunk_size: INT>>"
    )
}


SPARK_FOLDER = "spark"
"""Views written for Spark (`schema/spark/<view>.sql`) where no rewrite of the text reaches."""


def spark_views(export: Path) -> dict[str, str | None]:
    """Each view's Spark SQL (None: not offered to Spark), in creation order: its own Spark
    text where it has one, else its DuckDB text rewritten."""
    written = set(names(__package__, SPARK_FOLDER))
    return {
        info.name: query(__package__, info.name, SPARK_FOLDER)
        if info.name in written
        else spark_sql(strip_comments(info.sql))
        for info in views_in_order()
    }


def spark_statements(export: Path, names: Sequence[str] | None = None) -> list[str]:
    """The statements that define the tables and views over the export `export`."""
    read_manifest(export)
    names = list(names) if names is not None else export_trace_names(export)
    views = {name: sql for name, sql in spark_views(export).items() if sql is not None}
    statements = ["USE default"]
    statements += [_whole_table(export, table) for table in logical_tables()]
    for index, name in enumerate(names):
        statements += [f"CREATE DATABASE IF NOT EXISTS trace_{index}", f"USE trace_{index}"]
        statements += [_trace_table(export, table, name) for table in logical_tables()]
        statements += [f"CREATE OR REPLACE VIEW {view} AS {sql}" for view, sql in views.items()]
    statements.append("USE default")
    meta = export_meta(export)
    for view in views:
        branches = " UNION ALL ".join(
            f"SELECT {_literal(name)} AS trace, CAST({meta[name].get('dp_rank', 'NULL')} AS INT) "
            f"AS rank, * FROM trace_{index}.{view}"
            for index, name in enumerate(names)
        )
        statements.append(f"CREATE OR REPLACE VIEW {view} AS {branches}")
    return statements


def _whole_table(export: Path, table: str) -> str:
    return f"CREATE OR REPLACE VIEW {table} AS SELECT trace, rank, {_columns(table)} " + (
        f"FROM {_source(export, table)}"
    )


def _trace_table(export: Path, table: str, name: str) -> str:
    return (
        f"CREATE OR REPLACE VIEW {table} AS SELECT {_columns(table)} "
        f"FROM {_source(export, table)} WHERE trace = {_literal(name)}"
    )


def _source(export: Path, table: str) -> str:
    path = (export / table.removeprefix("_")).resolve()
    if not path.is_dir():
        return f"(SELECT {_empty_columns(table)}, CAST(NULL AS STRING) AS trace, " + (
            "CAST(NULL AS INT) AS rank) WHERE false"
        )
    return "parquet.`" + str(path).replace("`", "``") + "`"


def _columns(table: str) -> str:
    (spec,) = (spec for spec in table_specs() if spec.name == table)
    return ", ".join(column for column, _, _ in spec.columns)


def _empty_columns(table: str) -> str:
    (spec,) = (spec for spec in table_specs() if spec.name == table)
    items = []
    for column, declared, _ in spec.columns:
        sql_type = _CONSTRAINT.sub("", declared)
        spark_type = _SPARK_TYPES.get(sql_type, sql_type)
        items.append(f"CAST(NULL AS {spark_type}) AS {column}")
    return ", ".join(items)


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def main(argv: Sequence[str]) -> int:
    """Print the statements for the export named by the one argument, `;`-terminated."""
    if len(argv) != 1:
        print("usage: python -m stepscope.schema.spark_views EXPORT_DIR", file=sys.stderr)
        return 2
    for statement in spark_statements(Path(argv[0])):
        print(statement + ";")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
