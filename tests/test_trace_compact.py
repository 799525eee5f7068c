"""A trace closed complete is rewritten smaller, with the same types, tables, comments and rows."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from stepscope.schema import open_trace
from stepscope.schema.storage_size import table_bytes
from stepscope.schema.trace_file import stored_tables
from stepscope.tracer import compact
from stepscope.tracer.writer import _WRITER_CONFIG
from traces import case, decode_workload, record

_FREE_BLOCKS = "SELECT free_blocks FROM pragma_database_size()"
_CATALOG = """
SELECT table_name, column_name, data_type, comment FROM duckdb_columns()
WHERE database_name = current_database() ORDER BY ALL
"""


def _contents(path: Path) -> dict[str, object]:
    with duckdb.connect(str(path), read_only=True) as con:
        tables = {
            table: sorted(con.table(table).fetchall(), key=repr) for table in stored_tables(con)
        }
        return {"catalog": con.execute(_CATALOG).fetchall(), **tables}


def test_a_compacted_trace_holds_exactly_what_was_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compact, "COMPACT_FROM_BYTES", 1 << 40)
    written = record(decode_workload(64, 400), tmp_path / "t.duckdb", flush_every_steps=8).path
    copy = tmp_path / "copy.duckdb"
    shutil.copy(written, copy)
    monkeypatch.setattr(compact, "COMPACT_FROM_BYTES", 0)
    compact.compact(copy, _WRITER_CONFIG)
    assert copy.stat().st_size < written.stat().st_size
    assert _contents(copy) == _contents(written)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.duckdb", "t.duckdb"]


def test_a_trace_closed_complete_is_compacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compact, "COMPACT_FROM_BYTES", 0)
    path = record(decode_workload(64, 400), tmp_path / "t.duckdb", flush_every_steps=8).path
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute(_FREE_BLOCKS).fetchall() == [(0,)]
    with open_trace(path) as trace:
        assert trace.complete
        trace.read_all()


def test_a_failed_compaction_keeps_the_trace_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compact, "COMPACT_FROM_BYTES", 0)
    (tmp_path / "t.duckdb.compacting").mkdir()  # the copy cannot be made
    path = record(case("22"), tmp_path / "t.duckdb").path
    with open_trace(path) as trace:
        assert trace.complete and trace.num_steps > 0


def test_table_bytes_share_out_the_file(tmp_path: Path) -> None:
    path = record(decode_workload(64, 400), tmp_path / "t.duckdb").path
    with duckdb.connect(str(path), read_only=True) as con:
        sizes = table_bytes(con)
        assert set(sizes) <= set(stored_tables(con))
    assert sizes["_scheduled"] == max(sizes.values())
    assert 0 < sum(sizes.values()) <= path.stat().st_size
