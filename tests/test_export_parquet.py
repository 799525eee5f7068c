"""`stepscope export --parquet`: every table, read back by pyarrow and DuckDB, row for row."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.dataset as ds
import pytest
from export_traces import STORM
from stepscope.schema import SCHEMA_VERSION, logical_tables, open_trace
from stepscope.schema.step_window import WHOLE, StepWindow
from test_cli import stepscope
from traces import case, record

IDENTITY = ["engine", "host", "rank", "trace_created_at"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("parquet")
    traces = {"storm": folder / "storm.duckdb", "refund run": folder / "refund run.duckdb"}
    record(STORM, traces["storm"])
    record(case("07"), traces["refund run"])
    return traces


@pytest.fixture(scope="module")
def dataset(traces: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dataset") / "export"
    for trace in traces.values():
        result = stepscope("export", str(trace), "--parquet", str(out))
        assert result.returncode == 0, result.stderr
    return out


def _trace_rows(
    trace: Path, table: str, window: StepWindow = WHOLE
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The table as the reader sees it, ENUMs as text, with the identity the export adds."""
    with open_trace(trace, window) as opened:
        meta = opened.meta
        relation = opened.sql(f"SELECT * FROM {table}")
        rows = [tuple(_plain(v) for v in row) for row in relation.fetchall()]
        identity = (meta["engine"], meta["host"], None, meta["created_at"])
        return relation.columns, [row + identity for row in rows]


def _plain(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


@pytest.mark.parametrize("table", logical_tables())
def test_pyarrow_reads_each_table_back_row_for_row(
    table: str, traces: dict[str, Path], dataset: Path
) -> None:
    name = table.removeprefix("_")
    data = ds.dataset(dataset / name, format="parquet", partitioning="hive")
    for trace_name, trace in traces.items():
        columns, expected = _trace_rows(trace, table)
        got = data.to_table(filter=ds.field("trace") == trace_name)
        assert got.column_names == [*columns, *IDENTITY, "trace"]
        rows = [tuple(r.values())[:-1] for r in got.to_pylist()]
        assert rows == expected, table


def test_a_window_exports_the_rows_a_windowed_reader_reads(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    out, window = tmp_path / "window", StepWindow(5, 12)
    result = stepscope("export", str(traces["storm"]), "--parquet", str(out),
                       "--from-step", "5", "--to-step", "12")  # fmt: skip
    assert result.returncode == 0, result.stderr
    for table in logical_tables():
        data = ds.dataset(out / table.removeprefix("_"), format="parquet", partitioning="hive")
        rows = [tuple(r.values())[:-1] for r in data.to_table().to_pylist()]
        assert rows == _trace_rows(traces["storm"], table, window)[1], table
        if table == "_steps":
            assert [row[0] for row in rows] == list(range(5, 13))
        if table == "_requests":
            assert 0 < len(rows) < len(_trace_rows(traces["storm"], table)[1])


@pytest.mark.parametrize("table", logical_tables())
def test_duckdb_reads_the_folder_as_one_dataset(
    table: str, traces: dict[str, Path], dataset: Path
) -> None:
    name = table.removeprefix("_")
    relation = duckdb.sql(
        f"SELECT * FROM read_parquet('{dataset}/{name}/*/*.parquet', hive_partitioning = true)"
    )
    rows = relation.fetchall()
    for trace_name, trace in traces.items():
        columns, expected = _trace_rows(trace, table)
        assert relation.columns == [*columns, *IDENTITY, "trace"]
        got = [tuple(_plain(v) for v in row[:-1]) for row in rows if row[-1] == trace_name]
        assert got == expected, table


def test_the_schema_file_documents_every_column(dataset: Path) -> None:
    schema = json.loads((dataset / "stepscope_export.json").read_text())
    assert schema["export_schema_version"] == 1 and schema["trace_schema_version"] == SCHEMA_VERSION
    assert list(schema["tables"]) == [t.removeprefix("_") for t in logical_tables()]
    for table, columns in schema["tables"].items():
        described = duckdb.sql(
            f"DESCRIBE SELECT * FROM read_parquet('{dataset}/{table}/*/*.parquet', "
            "hive_partitioning = false)"
        ).fetchall()
        assert [[name, sql_type] for name, sql_type, *_ in described] == columns
        assert columns[-4:] == [
            ["engine", "VARCHAR"],
            ["host", "VARCHAR"],
            ["rank", "INTEGER"],
            ["trace_created_at", "VARCHAR"],
        ]
    assert dict(schema["tables"]["steps"])["admission_stop"] == "VARCHAR"


def test_files_are_zstd_and_partitioned_by_trace(dataset: Path) -> None:
    files = sorted(p.relative_to(dataset).as_posix() for p in dataset.rglob("*.parquet"))
    assert "steps/trace=storm/part-0.parquet" in files
    assert "steps/trace=refund%20run/part-0.parquet" not in files
    assert "steps/trace=refund run/part-0.parquet" in files
    assert len(files) == 2 * len(logical_tables())
    codecs = duckdb.sql(
        f"SELECT DISTINCT compression FROM parquet_metadata('{dataset}/*/*/*.parquet')"
    ).fetchall()
    assert codecs == [("ZSTD",)]


def test_exporting_a_trace_again_replaces_its_partitions(
    traces: dict[str, Path], dataset: Path
) -> None:
    before = duckdb.sql(
        f"SELECT trace, count(*) FROM read_parquet('{dataset}/steps/*/*.parquet', "
        "hive_partitioning = true) GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    result = stepscope("export", str(traces["storm"]), "--parquet", str(dataset))
    assert result.returncode == 0, result.stderr
    after = duckdb.sql(
        f"SELECT trace, count(*) FROM read_parquet('{dataset}/steps/*/*.parquet', "
        "hive_partitioning = true) GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert after == before
    assert not [p for p in dataset.rglob("*") if p.name.startswith(".")]


def test_bad_input_is_one_line_and_writes_nothing(traces: dict[str, Path], tmp_path: Path) -> None:
    storm = str(traces["storm"])
    a_file = tmp_path / "taken"
    a_file.write_text("keep me")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    cases = [
        (
            ["export", str(tmp_path / "missing.duckdb"), "--parquet", str(tmp_path / "o1")],
            "no such",
        ),
        (["export", str(STORM), "--parquet", str(tmp_path / "o2")], "not"),
        (["export", storm, "--parquet", str(a_file)], "is not a folder"),
        (["export", storm, "--parquet", str(other)], "not a stepscope Parquet export"),
        (["export", storm, "--parquet", str(a_file / "sub")], "cannot write"),
        (["export", storm], "nothing to export"),
    ]
    for args, words in cases:
        result = stepscope(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, args
        assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "taken"]
    assert a_file.read_text() == "keep me"
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


def test_an_older_trace_is_exported_with_todays_columns(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    older = tmp_path / "older.duckdb"
    shutil.copy(traces["storm"], older)
    with duckdb.connect(str(older)) as con:
        con.execute("DROP TABLE _spec_decode")
        con.execute("ALTER TABLE _requests DROP COLUMN lora_id")
        con.execute("UPDATE _meta SET value = '3' WHERE key = 'schema_version'")
    out = tmp_path / "out"
    assert stepscope("export", str(older), "--parquet", str(out)).returncode == 0
    current = tmp_path / "current"
    assert stepscope("export", str(traces["storm"]), "--parquet", str(current)).returncode == 0
    assert (out / "stepscope_export.json").read_text() == (
        current / "stepscope_export.json"
    ).read_text()
    lora = duckdb.sql(f"SELECT DISTINCT lora_id FROM '{out}/requests/*/*.parquet'").fetchall()
    assert lora == [(None,)]
    assert duckdb.sql(f"SELECT count(*) FROM '{out}/spec_decode/*/*.parquet'").fetchall() == [(0,)]
