"""Every reader gives the same answers on a compacted trace as on the trace as recorded.

A compacted trace stores `_requests` as `_request_rows` behind a stored view; the
views, exact replay, the diff, a Parquet export, a set of traces, a diff's two-trace
connection and the streaming cursor must not tell the two files apart.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.dataset as ds
import pytest
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.replay.diff import diff_traces
from stepscope.replay.exact import replay_exact
from stepscope.schema import logical_tables, open_pair, open_trace
from stepscope.schema.trace_set import open_traces
from stepscope.tracer import compact
from stepscope.tracer.export.parquet import export_parquet
from stepscope.tracer.writer import _WRITER_CONFIG
from test_trace_compact import _SHARED_PREFIXES, recorded_and_copied


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the trace as recorded, its compacted copy), from traffic with shared prompt prefixes."""
    folder = tmp_path_factory.mktemp("compacted")
    workload = parse_toml_workload(_SHARED_PREFIXES, source="shared")
    with pytest.MonkeyPatch.context() as patch:
        plain, compacted = recorded_and_copied(workload, folder, patch)
        compact.compact(compacted, _WRITER_CONFIG)
    with duckdb.connect(str(compacted), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM _request_rows").fetchall()[0][0] > 0
    return plain, compacted


def _rows(relation: duckdb.DuckDBPyRelation) -> list[tuple[object, ...]]:
    return sorted(relation.fetchall(), key=repr)


def test_every_table_and_view_reads_the_same(pair: tuple[Path, Path]) -> None:
    with open_trace(pair[0]) as plain, open_trace(pair[1]) as compacted:
        names = [*logical_tables(), *(info.name for info in plain.views())]
        for name in names:
            a, b = plain.sql(f"FROM {name}"), compacted.sql(f"FROM {name}")
            assert a.columns == b.columns and a.types == b.types, name
            assert _rows(a) == _rows(b), name
        stream = compacted.stream("SELECT prompt_token_ids FROM _requests ORDER BY request_index")
        prompts = plain.sql("SELECT prompt_token_ids FROM _requests ORDER BY request_index")
        assert stream.read_all().column(0).to_pylist() == [p for (p,) in prompts.fetchall()]


def test_replay_and_diff_see_the_same_run(pair: tuple[Path, Path]) -> None:
    assert replay_exact(pair[1]).divergence is None
    difference = diff_traces(pair[0], pair[1])
    assert difference.divergent_steps == [] and not difference.workload_differences
    assert not difference.request_deltas


def test_a_pair_reads_both(pair: tuple[Path, Path]) -> None:
    for a, b in (pair, pair[::-1]):
        with open_pair(a, b) as both:
            assert _rows(both.sql("FROM _requests")) == _rows(both.sql("FROM b._requests"))
            assert _rows(both.sql("FROM requests")) == _rows(both.sql("FROM b.requests"))


def test_exports_and_trace_sets_read_the_same(pair: tuple[Path, Path], tmp_path: Path) -> None:
    for path, name in zip(pair, ("plain", "compacted"), strict=True):
        export_parquet(path, tmp_path / name)
    exported = [
        ds.dataset(tmp_path / name / "requests", format="parquet").to_table().to_pylist()
        for name in ("plain", "compacted")
    ]
    keep = ("request_index", "prompt_token_ids", "prompt_len", "request_id")
    assert [{k: r[k] for k in keep} for r in exported[0]] == [
        {k: r[k] for k in keep} for r in exported[1]
    ]
    with open_traces(list(pair)) as traces:
        per_trace = traces.sql(
            "SELECT trace, list(prompt_token_ids ORDER BY request_index) FROM requests GROUP BY 1"
        ).fetchall()
    assert len(per_trace) == 2 and per_trace[0][1] == per_trace[1][1]
