"""A trace closed complete is rewritten smaller, with the same types, tables, comments and rows.

Compacted, `_requests` is stored as `_request_rows` (shared prompt prefixes once)
behind a stored view of the old name; every reader sees the same `_requests`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from stepscope.engine import Workload
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.schema import logical_tables, open_trace
from stepscope.schema.ddl import table_specs
from stepscope.schema.storage_size import table_bytes
from stepscope.schema.trace_file import stored_tables
from stepscope.tracer import compact
from stepscope.tracer.writer import _WRITER_CONFIG
from traces import case, decode_workload, record

_FREE_BLOCKS = "SELECT free_blocks FROM pragma_database_size()"
_CATALOG = """
SELECT table_name, column_name, data_type, comment FROM duckdb_columns()
WHERE database_name = current_database()
    AND table_name NOT IN ('_request_rows', '_prompt_prefixes')
ORDER BY ALL
"""
_TABLE_COMMENTS = """
SELECT table_name, comment FROM duckdb_tables() WHERE database_name = current_database()
UNION ALL
SELECT view_name, comment FROM duckdb_views() WHERE database_name = current_database()
    AND NOT internal
ORDER BY ALL
"""


def _contents(path: Path) -> dict[str, object]:
    """Each logical table's rows (in order where the trace orders them) and the catalog."""
    with duckdb.connect(str(path), read_only=True) as con:
        tables = {
            table: sorted(con.table(table).fetchall(), key=repr) for table in logical_tables()
        }
        catalog = con.execute(_CATALOG).fetchall()
        comments = [
            row
            for row in con.execute(_TABLE_COMMENTS).fetchall()
            if row[0] not in ("_request_rows", "_prompt_prefixes")
        ]
        return {"catalog": catalog, "comments": comments, **tables}


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


def test_compaction_keeps_to_its_memory_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """DuckDB's memory is capped while compacting (uncapped, it grows with the trace):
    a tight cap still gives every row, one too small for the copy keeps the trace as
    written, and neither leaves a file or spill folder behind."""
    workload = parse_toml_workload(_SHARED_PREFIXES, source="shared")
    written, copy = recorded_and_copied(workload, tmp_path, monkeypatch)
    too_small = tmp_path / "too_small.duckdb"
    shutil.copy(written, too_small)
    monkeypatch.setattr(compact, "MEMORY_LIMIT", "16MB")
    compact.compact(copy, _WRITER_CONFIG)
    assert copy.stat().st_size < written.stat().st_size
    assert _contents(copy) == _contents(written)
    monkeypatch.setattr(compact, "MEMORY_LIMIT", "1MB")
    compact.compact(too_small, _WRITER_CONFIG)
    assert "kept as written" in caplog.text
    # DuckDB says it either way, depending on where the copy ran out (the commit's block
    # allocation fails under load, a query's buffer otherwise).
    assert any(said in caplog.text for said in ("Out of Memory", "could not allocate block"))
    assert too_small.read_bytes() == written.read_bytes()
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == ["copy.duckdb", "t.duckdb", "too_small.duckdb"]


def test_table_bytes_share_out_the_file(tmp_path: Path) -> None:
    path = record(decode_workload(256, 400), tmp_path / "t.duckdb").path
    with duckdb.connect(str(path), read_only=True) as con:
        sizes = table_bytes(con)
        assert set(sizes) <= set(stored_tables(con))
    assert sizes["_scheduled"] == max(sizes.values())
    assert 0 < sum(sizes.values()) <= path.stat().st_size


_SHARED_PREFIXES = """
seed = 5
num_requests = 60
max_steps = 100000
vocab_size = 32000

[config]
block_size = 16
num_blocks = 400
max_num_batched_tokens = 512
max_num_seqs = 16
max_model_len = 2048
enable_prefix_caching = true

[arrivals]
process = "poisson"
rate = 0.5

[prompt_len]
distribution = "lognormal"
mean = 60
sigma = 0.9
max = 400

[output_len]
distribution = "lognormal"
mean = 20
sigma = 0.5
max = 80

[[prefix_groups]]
share = 0.6
prefix_len = 70

[[prefix_groups]]
share = 0.2
prefix_len = 300
"""


def recorded_and_copied(
    workload: Workload, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """(`t.duckdb` recorded and left as written, `copy.duckdb` a copy); then every size compacts."""
    monkeypatch.setattr(compact, "COMPACT_FROM_BYTES", 1 << 40)
    written = record(workload, folder / "t.duckdb").path
    copy = folder / "copy.duckdb"
    shutil.copy(written, copy)
    monkeypatch.setattr(compact, "COMPACT_FROM_BYTES", 0)
    return written, copy


def test_shared_prompt_prefixes_are_stored_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = parse_toml_workload(_SHARED_PREFIXES, source="shared")
    written, copy = recorded_and_copied(workload, tmp_path, monkeypatch)
    compact.compact(copy, _WRITER_CONFIG)
    assert _contents(copy) == _contents(written)
    with duckdb.connect(str(copy), read_only=True) as con:
        assert "_requests" not in stored_tables(con)
        stored = con.execute(_STORED_PROMPTS).fetchall()
    with open_trace(copy) as trace:
        prompts = trace.sql("SELECT request_id, prompt_token_ids FROM requests").fetchall()
        assert dict(prompts) == {r.request_id: list(r.prompt_token_ids) for r in workload.requests}
    (references, shared, whole), total = (
        stored[0],
        sum(len(r.prompt_token_ids) for r in workload.requests),
    )
    assert whole + shared == total and references > 10
    assert (references, shared) == _group_sharing([r.prompt_token_ids for r in workload.requests])


def _group_sharing(prompts: list[tuple[int, ...]]) -> tuple[int, int]:
    """(requests after the first of their prefix group, whole-block tokens they share with it)."""
    groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for prompt in prompts:
        groups.setdefault(prompt[:16], []).append(prompt)
    references, shared = 0, 0
    for members in groups.values():
        common = _common_prefix_len(members) if len(members) > 1 else 0
        references += len(members) - 1 if common >= 16 else 0
        shared += (len(members) - 1) * (common // 16 * 16)
    return references, shared


def _common_prefix_len(prompts: list[tuple[int, ...]]) -> int:
    shortest = min(map(len, prompts))
    return next((i for i in range(shortest) if len({p[i] for p in prompts}) > 1), shortest)


_STORED_PROMPTS = """
SELECT
    count(prompt_prefix_id) - (SELECT count(*) FROM _prompt_prefixes),
    coalesce(sum(prompt_prefix_len), 0) - (SELECT sum(len(token_ids)) FROM _prompt_prefixes),
    sum(len(prompt_suffix_token_ids)) + (SELECT sum(len(token_ids)) FROM _prompt_prefixes)
FROM _request_rows
"""


def test_a_prompt_not_rebuilt_exactly_keeps_the_trace_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = parse_toml_workload(_SHARED_PREFIXES, source="shared")
    written, copy = recorded_and_copied(workload, tmp_path, monkeypatch)
    wrong = [(index, 0, 16) for index in range(1, len(workload.requests))]
    monkeypatch.setattr(compact, "references", lambda _prompts: iter(wrong))
    compact.compact(copy, _WRITER_CONFIG)
    assert copy.read_bytes() == written.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.duckdb", "t.duckdb"]


_REQUESTS_COLUMNS = """
SELECT column_name, data_type FROM duckdb_columns()
WHERE database_name = current_database() AND table_name = '_requests'
ORDER BY column_index
"""


def test_the_compacted_requests_have_the_recorded_columns_whatever_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_request_rows` and its view take `_requests`' columns from the recorded table (made
    from `tables.sql`): a column added there is compacted and read back with no other edit."""
    monkeypatch.setattr(compact, "COMPACT_FROM_BYTES", 1 << 40)
    workload = parse_toml_workload(_SHARED_PREFIXES, source="shared")
    written = record(workload, tmp_path / "t.duckdb").path
    with duckdb.connect(str(written)) as con:
        con.execute("ALTER TABLE _requests ADD COLUMN added_fact VARCHAR[]")
        con.execute("UPDATE _requests SET added_fact = [request_id, 'x']")
    copy = tmp_path / "copy.duckdb"
    shutil.copy(written, copy)
    monkeypatch.setattr(compact, "COMPACT_FROM_BYTES", 0)
    compact.compact(copy, _WRITER_CONFIG)
    with duckdb.connect(str(written), read_only=True) as con:
        columns = con.execute(_REQUESTS_COLUMNS).fetchall()
        rows = con.execute("FROM _requests ORDER BY request_index").fetchall()
    with duckdb.connect(str(copy), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM _prompt_prefixes").fetchall()[0][0] > 0
        assert con.execute(_REQUESTS_COLUMNS).fetchall() == columns
        assert con.execute("FROM _requests ORDER BY request_index").fetchall() == rows
    (spec,) = (spec for spec in table_specs() if spec.name == "_requests")
    assert [name for name, _ in columns] == [name for name, _, _ in spec.columns] + ["added_fact"]
