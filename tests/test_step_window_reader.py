"""A trace read through a step window: every table and view answers with the window's rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from recordings import delete_oldest, record_folder, recording
from stepscope.schema import Trace, TraceError, logical_tables, open_trace
from stepscope.schema.ddl import table_specs
from stepscope.schema.step_window import StepWindow
from traces import case, decode_workload, record

STEP_TABLES = [
    spec.name for spec in table_specs() if any(column[0] == "step" for column in spec.columns)
]


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("window") / "storm.duckdb"
    record(case("03"), path, checkpoint_every=4)
    return path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("window") / "rec"
    return record_folder(decode_workload(6, 60), folder, every="10steps")


def _rows(trace: Trace, table: str) -> list[tuple[object, ...]]:
    return sorted(trace.sql(f"SELECT * FROM {table}").fetchall(), key=repr)


def _named(trace: Trace) -> set[int]:
    """The request indices the trace's step-keyed rows name, and those arriving in it."""
    rows = trace.sql(
        "SELECT request_index FROM _scheduled UNION SELECT request_index FROM _events "
        "UNION SELECT request_index FROM _allocations UNION SELECT request_index "
        "FROM _checkpoint_requests UNION SELECT request_index FROM _preemptions"
    ).fetchall()
    return {index for (index,) in rows if index is not None}


@pytest.mark.parametrize("which", ["trace_file", "recorded"])
def test_each_step_table_holds_the_windows_rows_of_the_whole(
    which: str, request: pytest.FixtureRequest
) -> None:
    path: Path = request.getfixturevalue(which)
    with open_trace(path) as whole:
        low = whole.first_step + 3
        high = low + 5
        expected = {
            table: sorted(
                whole.sql(f"SELECT * FROM {table} WHERE step BETWEEN {low} AND {high}").fetchall(),
                key=repr,
            )
            for table in STEP_TABLES
        }
        all_requests = _rows(whole, "_requests")
    with open_trace(path, StepWindow(low, high)) as window:
        assert (window.first_step, window.last_step, window.num_steps) == (low, high, 6)
        assert any(expected[table] for table in STEP_TABLES if table != "_steps")
        for table in STEP_TABLES:
            assert _rows(window, table) == expected[table], table
        requests = _rows(window, "_requests")
        assert all(row in all_requests for row in requests)
        indices = {row[0] for row in requests}
        assert _named(window) <= indices
        arrived = {row[0] for row in requests if low <= row[2] <= high}
        assert indices - _named(window) <= arrived
        # The views read the cut tables: a window's steps view is the whole's, cut.
        steps = window.sql("SELECT step FROM steps ORDER BY step").fetchall()
        assert steps == [(step,) for step in range(low, high + 1)]


def test_a_window_to_the_end_and_the_meta_left_whole(trace_file: Path) -> None:
    with open_trace(trace_file) as whole:
        last, meta = whole.last_step, whole.meta
        num_requests = whole.sql("SELECT count(*) FROM _requests").fetchall()[0]
    with open_trace(trace_file, StepWindow(last)) as window:
        assert (window.first_step, window.last_step) == (last, last)
        assert window.meta == meta
        assert window.sql("SELECT count(*) FROM _requests").fetchall()[0] < num_requests
        assert window.sql("SELECT count(*) FROM _config").fetchall()[0] == (1,)


def test_requests_outside_the_window_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "decode.duckdb"
    workload = decode_workload(2, 30)
    record(workload, path)
    finishes = "SELECT count(*) FROM _events WHERE kind = 'finish'"
    with open_trace(path) as whole:
        assert whole.sql("SELECT count(*) FROM requests").fetchall()[0] == (2,)
        assert whole.sql(finishes).fetchall()[0] == (2,)
    with open_trace(path, StepWindow(10, 12)) as window:
        # Both run through the window, so both are in it, neither arriving nor finishing.
        assert window.sql("SELECT count(*) FROM requests").fetchall()[0] == (2,)
        assert window.sql(finishes).fetchall()[0] == (0,)


@pytest.mark.parametrize(
    ("window", "message"),
    [
        (StepWindow(10_000), "--from-step 10000: {path} has steps 0..{last}"),
        (StepWindow(2, 10_000), "--to-step 10000: {path} has steps 0..{last}"),
    ],
)
def test_a_bound_the_trace_does_not_hold_is_an_error(
    trace_file: Path, window: StepWindow, message: str
) -> None:
    with open_trace(trace_file) as whole:
        last = whole.last_step
    with pytest.raises(TraceError) as raised:
        open_trace(trace_file, window)
    assert str(raised.value) == message.format(path=trace_file, last=last)


def test_a_trimmed_recordings_window_from_step_0_starts_at_its_first(tmp_path: Path) -> None:
    folder = record_folder(decode_workload(6, 60), tmp_path / "rec", every="10steps")
    delete_oldest(folder, 2)
    with open_trace(folder) as whole:
        first, last = whole.first_step, whole.last_step
    assert first > 0
    with open_trace(folder, StepWindow(0, first + 1)) as window:
        assert (window.first_step, window.last_step) == (first, first + 1)
    with pytest.raises(TraceError, match=rf"--from-step 1: .* has steps {first}\.\.{last}"):
        open_trace(folder, StepWindow(1))


def test_a_window_of_a_recording_being_written_reaches_into_its_open_segment(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "live"
    with recording(case("03"), folder, "4steps", stop_after=10):
        with open_trace(folder) as whole:
            last = whole.last_step
            expected = whole.sql("SELECT * FROM _scheduled WHERE step >= 7").fetchall()
        assert last >= 9, "the open segment's parts hold the last steps"
        with open_trace(folder, StepWindow(7)) as window:
            assert (window.first_step, window.last_step) == (7, last)
            assert window.sql("SELECT * FROM _scheduled").fetchall() == expected
            assert window.complete is False


def test_the_whole_trace_is_read_as_stored(trace_file: Path) -> None:
    """No window, no view between a query and a trace file's stored tables."""
    with open_trace(trace_file) as whole:
        kinds = dict(
            whole.sql(
                "SELECT table_name, table_type FROM information_schema.tables "
                "WHERE table_schema = 'main' AND table_catalog = 'memory'"
            ).fetchall()
        )
    assert not set(logical_tables()) & set(kinds) - {"_requests"}
