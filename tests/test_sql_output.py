"""`stepscope sql --json` is strict JSON and `--csv` is what DuckDB's COPY writes."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from test_cli import stepscope
from traces import case, record

from stepscope.sql_output import json_value

ODD_VALUES = (
    "SELECT 'nan'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, '\\x00\\xff'::BLOB AS blob, "
    "INTERVAL '1 day 02:03:04.5' AS gap, true AS flag, {'a': 1, 'b': 'x,y'} AS st, "
    "[1, NULL] AS list, NULL::INT AS nothing, '' AS empty, 'say \"hi\"' AS quoted, "
    "1.50::DECIMAL(4,2) AS money, TIMESTAMP '2024-01-02 03:04:05' AS ts, "
    "-INTERVAL 90 SECOND AS back"
)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "run.duckdb"
    record(case("03"), path)
    return path


def test_json_is_strict_json(trace: Path) -> None:
    result = stepscope("sql", str(trace), ODD_VALUES, "--json")
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    row = json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert row == {
        "nan": None,
        "inf": None,
        "blob": "AP8=",
        "gap": "P1DT2H3M4.5S",
        "flag": True,
        "st": {"a": 1, "b": "x,y"},
        "list": [1, None],
        "nothing": None,
        "empty": "",
        "quoted": 'say "hi"',
        "money": 1.5,
        "ts": "2024-01-02T03:04:05",
        "back": "-PT1M30S",
    }


def test_json_and_csv_together_is_an_error(trace: Path) -> None:
    result = stepscope("sql", str(trace), "SELECT 1", "--json", "--csv")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--json" in result.stderr and "--csv" in result.stderr


MIXED_ROWS = (
    "SELECT i, CASE i % 5 WHEN 0 THEN NULL WHEN 1 THEN '' WHEN 2 THEN 'a,b' "
    "WHEN 3 THEN 'say \"hi\"' ELSE 'plain' || i END AS text, "
    "CASE WHEN i % 2 = 0 THEN i END AS even, i / 4 AS quarter, "
    "CASE WHEN i % 3 = 0 THEN 'nan'::DOUBLE ELSE i / 3 END AS third, "
    "i * 2 AS twice, 'x' AS \"{a}\" FROM range(25000) t(i)"
)
"""Rows over several batches, each column mixing values that print as they are with ones
that need quoting (CSV), NULLs or conversion (JSON); braces in a name."""


@pytest.mark.parametrize("query", [ODD_VALUES, MIXED_ROWS], ids=["odd-values", "many-rows"])
def test_csv_is_what_duckdb_copy_writes(trace: Path, tmp_path: Path, query: str) -> None:
    result = stepscope("sql", str(trace), query, "--csv")
    assert result.returncode == 0, result.stderr
    expected = tmp_path / "copy.csv"
    duckdb.connect().sql(query).write_csv(str(expected))
    assert result.stdout == expected.read_text()
    assert "True" not in result.stdout


def test_json_of_many_rows_is_what_json_dumps_writes(trace: Path) -> None:
    """A name given twice keeps its last value, as a dict does."""
    query = f"SELECT *, -i AS twice FROM ({MIXED_ROWS})"
    result = stepscope("sql", str(trace), query, "--json")
    assert result.returncode == 0, result.stderr
    relation = duckdb.connect().sql(query)
    columns = relation.columns
    expected = [
        json.dumps({c: json_value(v) for c, v in zip(columns, row, strict=True)}, allow_nan=False)
        for row in relation.fetchall()
    ]
    assert result.stdout.splitlines() == expected
