"""`stepscope snapshot`: a window of a trace as one trace file that replays exactly on its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from stepscope.engine import TapeModelRunner
from stepscope.schema import open_trace
from stepscope.tracer.record_workload import record_workload
from stepscope.tracer.segments import SegmentSettings, parse_retention, parse_segment_every
from test_segmented_recording import traffic

STEP_COLUMNS = "* EXCLUDE (ended_at_ns, schedule_ns, model_ns, update_ns)"


def stepscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stepscope", *args], capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("source") / "trace.duckdb"
    workload = traffic()
    record_workload(workload, TapeModelRunner.for_workload(workload), path, checkpoint_every=100)
    return path


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same traffic as a folder whose oldest segments retention has deleted."""
    path = tmp_path_factory.mktemp("source") / "recording"
    workload = traffic()
    settings = SegmentSettings(parse_segment_every("80steps", "x"), parse_retention("90kB", "x"))
    record_workload(
        workload,
        TapeModelRunner.for_workload(workload),
        path,
        checkpoint_every=0,
        segments=settings,
    )
    return path


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_the_last_steps_from_the_checkpoint_before_them(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "incident.duckdb"
    result = stepscope("snapshot", str(trace), "--last-steps", "150", "-o", str(out))
    assert result.returncode == 0, result.stderr
    (last,) = rows(trace, "SELECT max(step) FROM _steps")[0]
    first = ((last - 149) // 100) * 100  # widened back to the checkpoint at or before it
    assert f"steps {first}..{last} (from the checkpoint at step {first}" in result.stderr
    assert rows(out, "SELECT min(step), max(step), count(*) FROM _steps") == [
        (first, last, last - first + 1)
    ]
    for table, columns in (("_steps", STEP_COLUMNS), ("_scheduled", "*"), ("_events", "*")):
        window = f"SELECT {columns} FROM {table} WHERE step BETWEEN {first} AND {last} ORDER BY ALL"
        assert rows(out, window) == rows(trace, window), table
    with open_trace(out) as snapshot:
        assert snapshot.complete, "it ends where the complete run ended"
        assert snapshot.meta["snapshot_from_step"] == str(first)
        assert snapshot.meta["snapshot_of"] == str(trace)
    replayed = stepscope("replay", str(out))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "identical" in replayed.stdout


def test_a_window_the_run_went_on_past_is_incomplete(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "middle.duckdb"
    result = stepscope(
        "snapshot", str(trace), "--from-step", "120", "--to-step", "250", "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    with open_trace(out) as snapshot:
        assert not snapshot.complete, "the run went on past the window"
    replayed = stepscope("replay", str(out))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "the trace is incomplete: compared what it holds" in " ".join(replayed.stdout.split())


def test_a_window_that_starts_at_step_0_needs_no_checkpoint(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "start.duckdb"
    result = stepscope(
        "snapshot", str(trace), "--from-step", "0", "--to-step", "60", "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert rows(out, "SELECT min(step), max(step) FROM _steps") == [(0, 60)]
    assert stepscope("replay", str(out)).returncode == 0


def test_the_last_minutes_by_the_steps_wall_clock(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "recent.duckdb"
    assert stepscope("snapshot", str(trace), "--last", "1h", "-o", str(out)).returncode == 0
    assert rows(out, "SELECT count(*) FROM _steps") == rows(trace, "SELECT count(*) FROM _steps")


def test_a_snapshot_of_a_recording_whose_first_segments_are_gone_replays(
    recording: Path, tmp_path: Path
) -> None:
    out = tmp_path / "from-folder.duckdb"
    result = stepscope("snapshot", str(recording), "--last-steps", "100", "-o", str(out))
    assert result.returncode == 0, result.stderr
    replayed = stepscope("replay", str(out), "--json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout)["identical"]


def test_a_late_window_of_a_trace_without_max_steps_replays_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    """As a vLLM server's: the trace names no max_steps, and the window starts more steps
    past 0 than it holds; a replay that departs says where, with no run from step 0."""
    source = tmp_path / "long.duckdb"
    workload = traffic(800)
    record_workload(workload, TapeModelRunner.for_workload(workload), source, checkpoint_every=100)
    out = tmp_path / "late.duckdb"
    taken = stepscope("snapshot", str(source), "--last-steps", "50", "-o", str(out))
    assert taken.returncode == 0, taken.stderr
    with duckdb.connect(str(out)) as con:
        con.execute("DELETE FROM _meta WHERE key = 'max_steps'")
        ((first, num_steps),) = con.execute("SELECT min(step), count(*) FROM _steps").fetchall()
    assert first > num_steps + 1000
    replayed = stepscope("replay", str(out), "--json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout)["identical"]
    with duckdb.connect(str(out)) as con:
        con.execute(f"UPDATE _scheduled SET num_tokens = num_tokens + 1 WHERE step = {first + 5}")
    departed = stepscope("replay", str(out))
    assert departed.returncode == 1, departed.stdout + departed.stderr
    assert f"diverged at step {first + 5}" in " ".join(departed.stdout.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--last-steps", "10", "--from-step", "3"], "choose the window with one of"),
        ([], "choose the window with one of"),
        (["--last", "ten minutes"], "--last 'ten minutes': expected a time"),
        (["--from-step", "999999"], "--from-step 999999:"),
        (["--last-steps", "5", "--to-step", "-4"], "--to-step -4:"),
    ],
)
def test_bad_windows_are_one_line(
    trace: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "bad.duckdb"
    result = stepscope("snapshot", str(trace), *args, "-o", str(out))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert message in line and "Traceback" not in result.stderr
    assert not out.exists() and not list(tmp_path.iterdir())


def test_a_snapshot_never_overwrites_a_file(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "taken.duckdb"
    out.write_bytes(b"precious")
    result = stepscope("snapshot", str(trace), "--last-steps", "5", "-o", str(out))
    assert result.returncode == 2 and "already exists" in result.stderr
    assert out.read_bytes() == b"precious"
    result = stepscope("snapshot", str(trace), "--last-steps", "5", "-o", str(trace))
    assert result.returncode == 2
