"""One trace reader: a file, a set and a diff's pair read the same views under one lockdown.

Every reader is a `TraceReader` (`schema/reader.py`); its traces' views are created
one way (`member_views`), and every connection over a trace or a sweep result is
under `schema/lockdown.py`, even for the reader's own prepared queries, which skip
the statement check a user's query gets.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import REPO
from stepscope.schema import (
    TraceError,
    TraceReader,
    open_pair,
    open_trace,
    open_traces,
    view_infos,
)
from stepscope.schema.lockdown import LOCKED_CONFIG
from stepscope.schema.step_condition import STEP_COLUMNS, StepCondition, condition_rows
from traces import case, prefill_heavy_workload, record

PACKAGES = ("engine", "replay", "schema", "stepscope", "tracer", "tui")

OPENS_DUCKDB = {
    "schema/lockdown.py": "every reader's connection, under the lockdown",
    "tracer/writer.py": "the recorder writes its trace",
    "tracer/compact.py": "compaction writes a trace's compacted copy",
    "tracer/empty_trace.py": "the empty trace new traces are copies of, written once",
    "replay/sweep/result_writer.py": "a sweep writes its result",
}
"""The modules that may call `duckdb.connect`, and why."""


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two different traces: a preempting run (A) and a short plain one (B)."""
    folder = tmp_path_factory.mktemp("readers")
    a = record(case("03"), folder / "a.duckdb").path
    b = record(case("01"), folder / "b.duckdb").path
    return a, b


@contextmanager
def each_reader(a: Path, b: Path, kind: str) -> Iterator[TraceReader]:
    reader: TraceReader
    if kind == "file":
        reader = open_trace(a)
    elif kind == "set":
        reader = open_traces([a, b])
    else:
        reader = open_pair(a, b)
    with reader:
        yield reader


@pytest.mark.parametrize("kind", ["file", "set", "pair"])
@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM '/etc/hostname'",
        "SET enable_external_access = true",
        "SET lock_configuration = false",
        "ATTACH '/tmp/stepscope-reader-other.duckdb' AS other",
        "INSTALL httpfs",
    ],
)
def test_every_reader_is_locked_down_even_for_its_own_queries(
    traces: tuple[Path, Path], kind: str, query: str
) -> None:
    """`execute` runs the reader's own SQL without the user's statement check: the lockdown
    alone holds there."""
    with each_reader(*traces, kind) as reader, pytest.raises(TraceError):
        reader.execute(query)
    assert not Path("/tmp/stepscope-reader-other.duckdb").exists()


def test_a_pair_reads_each_side_from_its_own_trace(traces: tuple[Path, Path]) -> None:
    a, b = traces
    with open_trace(a) as only_a, open_trace(b) as only_b, open_pair(a, b) as both:
        for name in ("steps", "_steps", "requests", "preemptions", "summary"):
            assert both.sql(f"SELECT * FROM {name}").fetchall() == (
                only_a.sql(f"SELECT * FROM {name}").fetchall()
            ), name
            assert both.sql(f"SELECT * FROM b.{name}").fetchall() == (
                only_b.sql(f"SELECT * FROM {name}").fetchall()
            ), name
        assert only_a.num_steps != only_b.num_steps


def test_a_pair_of_one_trace_with_itself(traces: tuple[Path, Path]) -> None:
    a, _ = traces
    with open_pair(a, a) as both:
        assert (
            both.sql("SELECT count(*) FROM steps EXCEPT SELECT count(*) FROM b.steps").fetchall()
            == []
        )


def test_every_reader_has_every_view(traces: tuple[Path, Path]) -> None:
    names = [info.name for info in view_infos()]
    for kind in ("file", "set", "pair"):
        with each_reader(*traces, kind) as reader:
            for name in names:
                reader.sql(f"SELECT * FROM {name} LIMIT 1").fetchall()
                if kind == "pair":
                    reader.sql(f"SELECT * FROM b.{name} LIMIT 1").fetchall()


def test_a_break_condition_is_locked_down() -> None:
    with pytest.raises(TraceError, match="disabled by configuration"):
        StepCondition("(SELECT count(*) FROM read_csv('/etc/passwd')) > 0")
    assert StepCondition("step = 0 AND idle").holds({**STEP_COLUMNS, "step": 0})


def test_a_conditions_rows_read_alike_in_any_range(tmp_path: Path) -> None:
    """A trace's steps read as a condition reads them, in small ranges or in one, with an
    idle step's columns as `STEP_COLUMNS` has them."""
    path = tmp_path / "t.duckdb"
    record(prefill_heavy_workload(), path)
    with open_trace(path) as trace:
        last = trace.num_steps - 1
        whole = condition_rows(trace, 0, last).to_pylist()
        pieces = [
            condition_rows(trace, first, first + 6).to_pylist() for first in range(0, last + 1, 7)
        ]
    assert [row for piece in pieces for row in piece] == whole
    assert [row["step"] for row in whole] == list(range(last + 1))
    assert list(whole[0]) == list(STEP_COLUMNS)
    later = StepCondition("num_scheduled_reqs > 1 AND step > 3")
    expected = min(
        row["step"] for row in whole if row["num_scheduled_reqs"] > 1 and row["step"] > 3
    )
    assert later.first_step(pa.Table.from_pylist(whole)) == expected
    assert StepCondition("num_scheduled_reqs > 99").first_step(pa.Table.from_pylist(whole)) is None


def _calls(tree: ast.AST, name: str) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == name:
            yield node


def _sources() -> Iterator[tuple[str, ast.AST, str]]:
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            text = path.read_text()
            yield path.relative_to(REPO).as_posix(), ast.parse(text), text


def test_only_the_schema_opens_duckdb_to_read() -> None:
    """No private connection beside the readers: a module that opens DuckDB writes a file."""
    opening = {path for path, tree, _ in _sources() if any(_calls(tree, "duckdb.connect"))}
    assert opening == OPENS_DUCKDB.keys()


def test_one_lockdown_list() -> None:
    """The lockdown's settings are named in `schema/lockdown.py` and nowhere else."""
    named = {
        path
        for path, _, text in _sources()
        for setting in LOCKED_CONFIG
        if f'"{setting}"' in text or f"SET {setting}" in text
    }
    assert named == {"schema/lockdown.py"}
