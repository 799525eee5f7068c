"""Many traces in one query: trace files, folders of traces and Parquet exports as one set."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from parquet_layout import write_export
from stepscope.schema import TraceError, logical_tables, open_trace
from stepscope.schema.trace_set import open_traces
from test_feature_inputs import _as_schema_3
from traces import case, record

DP = {"dp_size": "2"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two data-parallel ranks of one server, and one engine that is not data-parallel."""
    folder = tmp_path_factory.mktemp("fleet")
    record(case("03"), folder / "rank0.duckdb", meta={**DP, "dp_rank": "0"})
    record(case("05"), folder / "rank1.duckdb", meta={**DP, "dp_rank": "1"})
    record(case("02"), folder / "solo.duckdb")
    return folder


@pytest.fixture(scope="module")
def export(fleet: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "fleet"
    for trace in sorted(fleet.glob("*.duckdb")):
        write_export(trace, out)
    return out


def _every_relation() -> list[str]:
    from stepscope.schema import view_infos

    return [*logical_tables(), *(info.name for info in view_infos())]


def _rows(relation: duckdb.DuckDBPyRelation) -> list[dict[str, Any]]:
    return [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]


def test_every_view_is_each_traces_own_rows_with_trace_and_rank_first(fleet: Path) -> None:
    ranks = {"rank0": 0, "rank1": 1, "solo": None}
    with open_traces([fleet]) as traces:
        assert traces.names == ["rank0", "rank1", "solo"]
        for name in _every_relation():
            relation = traces.sql(f"SELECT * FROM {name}")
            assert relation.columns[:2] == ["trace", "rank"], name
            assert relation.types[:2] == ["VARCHAR", "INTEGER"], name
            rows = relation.fetchall()
            assert [row[0] for row in rows] == sorted(row[0] for row in rows), name
            for trace, rank in ranks.items():
                with open_trace(fleet / f"{trace}.duckdb") as alone:
                    expected = alone.sql(f"SELECT * FROM {name}").fetchall()
                    assert [r[2:] for r in rows if r[0] == trace] == expected, (name, trace)
                assert {r[1] for r in rows if r[0] == trace} <= {rank}, (name, trace)


def test_which_rank_preempted_whom_is_one_query(fleet: Path) -> None:
    with open_traces([fleet / "rank0.duckdb", fleet / "rank1.duckdb"]) as traces:
        rows = traces.sql(
            "SELECT trace, rank, count(*) FROM preemptions GROUP BY ALL ORDER BY rank"
        ).fetchall()
    assert rows == [("rank0", 0, 1), ("rank1", 1, 2)]


def test_a_parquet_export_reads_as_its_traces(fleet: Path, export: Path) -> None:
    with open_traces([fleet]) as files, open_traces([export]) as exported:
        assert exported.names == files.names
        assert [t.rank for t in exported.traces] == [0, 1, None]
        for name in _every_relation():
            ours, theirs = files.sql(f"SELECT * FROM {name}"), exported.sql(f"SELECT * FROM {name}")
            assert theirs.types == ours.types, name
            assert theirs.fetchall() == ours.fetchall(), name


def test_files_and_an_export_together(fleet: Path, export: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.duckdb"
    shutil.copy(fleet / "solo.duckdb", other)
    with open_traces([other, export]) as traces:
        assert traces.names == ["other", "rank0", "rank1", "solo"]
        counts = traces.sql("SELECT trace, num_steps FROM summary").fetchall()
    assert counts[0][1] == counts[3][1]


def test_an_older_trace_joins_the_set(fleet: Path, tmp_path: Path) -> None:
    older = _as_schema_3(fleet / "solo.duckdb", tmp_path / "older.duckdb")
    with open_traces([older, fleet / "rank0.duckdb"]) as traces:
        config = _rows(traces.sql("SELECT trace, num_speculative_tokens FROM config"))
        for name in _every_relation():
            traces.sql(f"SELECT * FROM {name}").fetchall()
    with open_trace(older) as alone:
        expected = _rows(alone.sql("SELECT * FROM requests"))
    with open_traces([older]) as traces:
        got = _rows(traces.sql("SELECT * EXCLUDE (trace, rank) FROM requests"))
    assert config == [
        {"trace": "older", "num_speculative_tokens": 0},
        {"trace": "rank0", "num_speculative_tokens": 0},
    ]
    assert got == expected


def test_names_follow_the_file_names_and_paths_where_they_collide(
    fleet: Path, tmp_path: Path
) -> None:
    for sub in ("a", "b"):
        (tmp_path / "runs" / sub).mkdir(parents=True)
        shutil.copy(fleet / "solo.duckdb", tmp_path / "runs" / sub / "run.duckdb")
    shutil.copy(fleet / "rank0.duckdb", tmp_path / "runs" / "first.duckdb")
    with open_traces([tmp_path / "runs"]) as traces:
        assert traces.names == ["a/run", "b/run", "first"]
    paths = [tmp_path / "runs" / "a" / "run.duckdb", tmp_path / "runs" / "b" / "run.duckdb"]
    with open_traces(paths) as traces:
        assert traces.names == ["a/run", "b/run"]


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        (["rank0.duckdb", "rank0.duckdb"], "two traces named 'rank0'"),
        (["missing.duckdb"], "no such file or folder"),
        (["empty"], "no traces in it"),
        (["notes.txt"], "not a readable trace"),
    ],
)
def test_paths_that_are_not_a_set(
    fleet: Path, tmp_path: Path, paths: list[str], message: str
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("not a trace\n")
    shutil.copy(fleet / "rank0.duckdb", tmp_path / "rank0.duckdb")
    with pytest.raises(TraceError, match=message):
        open_traces([tmp_path / p for p in paths])


def test_a_trace_with_tables_not_of_its_version(fleet: Path, tmp_path: Path) -> None:
    edited = tmp_path / "edited.duckdb"
    shutil.copy(fleet / "solo.duckdb", edited)
    with duckdb.connect(str(edited)) as con:
        con.execute("ALTER TABLE _requests DROP COLUMN abort_before_update")
    with pytest.raises(TraceError, match=r"edited\.duckdb: trace edited: its tables do not match"):
        open_traces([fleet / "rank0.duckdb", edited])


def test_an_export_and_a_trace_of_the_same_name(fleet: Path, export: Path) -> None:
    with pytest.raises(TraceError, match="two traces named 'solo'"):
        open_traces([fleet / "solo.duckdb", export])


def test_an_export_of_an_unknown_version(export: Path, tmp_path: Path) -> None:
    newer = tmp_path / "newer"
    shutil.copytree(export, newer)
    manifest = newer / "stepscope_export.json"
    manifest.write_text(
        manifest.read_text().replace('"export_schema_version": 1', '"export_schema_version": 7')
    )
    with pytest.raises(TraceError, match="export schema version 7"):
        open_traces([newer])


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM '/etc/hostname'",
        "SELECT * FROM read_parquet('{export}/steps/*/*.parquet')",
        "COPY (SELECT 1) TO '/tmp/stepscope-set-leak.csv'",
        "ATTACH '/tmp/stepscope-set-other.duckdb' AS other",
        "INSTALL httpfs",
        "SET enable_external_access = true",
        "CREATE TABLE x (a INTEGER)",
        "DROP VIEW steps",
        "SELECT 1; DROP VIEW steps",
    ],
)
@pytest.mark.parametrize("source", ["fleet", "export"])
def test_queries_cannot_touch_files_or_the_set(
    fleet: Path, export: Path, query: str, source: str
) -> None:
    with open_traces([fleet if source == "fleet" else export]) as traces:
        with pytest.raises(TraceError):
            traces.sql(query.format(export=export))
        assert traces.sql("SELECT count(*) FROM steps").fetchall()[0][0] > 0
    assert not Path("/tmp/stepscope-set-leak.csv").exists()
    assert not Path("/tmp/stepscope-set-other.duckdb").exists()
