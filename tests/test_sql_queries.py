"""What `stepscope sql` takes for a query: only queries, on one trace as on a set, and a
one-line error that says what to type instead."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from stepscope.schema import TraceError
from traces import case, record

import stepscope as api

ENV = {"COLUMNS": "160", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding one trace, `good.duckdb`, and a set folder with a copy of it."""
    path = tmp_path_factory.mktemp("queries")
    record(case("03"), path / "good.duckdb")
    (path / "set").mkdir()
    shutil.copy(path / "good.duckdb", path / "set" / "good.duckdb")
    return path


def sql(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stepscope", "sql", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_query_says_so(folder: Path, query: str) -> None:
    assert_one_line_error(sql(folder, "good.duckdb", query), "the query is empty")


def test_a_query_of_nothing_but_a_comment_is_empty(folder: Path) -> None:
    assert_one_line_error(sql(folder, "good.duckdb", "/* just a note */"), "the query is empty")


@pytest.mark.parametrize("name", ["summary", "why_waiting;", "_steps", '"budget_spent"'])
@pytest.mark.parametrize("where", ["good.duckdb", "set"])
def test_a_bare_name_suggests_the_query(folder: Path, name: str, where: str) -> None:
    bare = name.strip(';"')
    result = sql(folder, where, name)
    assert_one_line_error(result, "Parser Error", f"try SELECT * FROM {bare}")


def test_a_bare_word_that_names_nothing_is_the_parser_error_alone(folder: Path) -> None:
    result = sql(folder, "good.duckdb", "sumary")
    assert_one_line_error(result, "Parser Error")
    assert "SELECT * FROM" not in result.stderr


@pytest.mark.parametrize(
    ("statement", "kind"),
    [
        ("DROP VIEW summary; SELECT * FROM steps", "DROP"),
        ("CREATE TEMP TABLE notes AS SELECT 1 AS a; SELECT * FROM notes", "CREATE"),
        ("CREATE OR REPLACE TEMP VIEW summary AS SELECT 1 AS fake", "CREATE"),
        ("SET threads = 1", "SET"),
    ],
)
@pytest.mark.parametrize("where", ["good.duckdb", "set"])
def test_only_queries_run_on_a_trace_as_on_a_set(
    folder: Path, statement: str, kind: str, where: str
) -> None:
    assert_one_line_error(sql(folder, where, statement), f"{kind} is not a query", "read-only")


def test_the_python_api_refuses_what_the_command_refuses(folder: Path) -> None:
    with api.open(folder / "good.duckdb") as trace:
        with pytest.raises(TraceError, match="DROP is not a query"):
            trace.sql("DROP VIEW summary")
        assert trace.sql("SELECT num_steps FROM summary").fetchall() == [(13,)]


@pytest.mark.parametrize("version", [2, 4, 5])
def test_a_duckdb_file_with_meta_and_no_tables_names_the_file(tmp_path: Path, version: int) -> None:
    path = tmp_path / "bare.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE _meta (key VARCHAR, value VARCHAR)")
        connection.execute("INSERT INTO _meta VALUES ('schema_version', ?)", [str(version)])
    assert_one_line_error(sql(tmp_path, str(path), "SELECT 1"), f"{path}:")


@pytest.mark.parametrize(
    "query",
    [
        "PIVOT (SELECT kind FROM events) ON kind USING count(*)",
        "SELECT * FROM (PIVOT (SELECT kind FROM events) ON kind USING count(*))",
    ],
)
@pytest.mark.parametrize("where", ["good.duckdb", "set"])
def test_a_pivot_on_the_data_is_a_query(folder: Path, query: str, where: str) -> None:
    """DuckDB parses a PIVOT whose columns come from the data as MULTI, not SELECT."""
    result = sql(folder, where, query)
    assert result.returncode == 0, result.stderr
    assert "1 rows" in result.stdout
