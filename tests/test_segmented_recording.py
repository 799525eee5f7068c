"""A recording written as a folder of segments: rotation, what each segment holds, retention,
the open segment's parts, and a recorder that falls behind (it drops steps, never waits).

The folder is read here with DuckDB's own Parquet reader, file by file, so these tests
check what the writer put on disk; reading it as a trace is `test_recording_reader.py`'s.
"""

from __future__ import annotations

import io
import itertools
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REPO
from recordings import recording
from rich.console import Console
from stepscope.engine import EngineLoop, TapeModelRunner, Workload
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.replay.checkpoints import checkpoint_steps, read_checkpoint
from stepscope.replay.exact import replay_exact
from stepscope.replay.from_step import StepWindow
from stepscope.schema import TraceError, open_trace
from stepscope.schema.recording_layout import (
    EXPIRED,
    MANIFEST,
    folder_bytes,
    read_manifest,
    scan,
    table_file,
    writer_pid,
)
from stepscope.tracer import background
from stepscope.tracer.background import BackgroundRecorder
from stepscope.tracer.checkpointer import Checkpointer
from stepscope.tracer.record_workload import record_workload, trace_meta
from stepscope.tracer.recorder import TraceRecorder
from stepscope.tracer.segments import (
    Retention,
    SegmentSettings,
    SegmentWriter,
    keep_rule,
    parse_retention,
    parse_segment_every,
)
from stepscope.tracer.writer import TraceWriteError
from test_crash_safety import WAIT_S, long_workload

from stepscope.commands.record import _print_kept

STORM = REPO / "examples" / "preemption_storm" / "workload.json"

TRAFFIC = """
description = "Chat traffic tight on KV blocks: preemptions, prefix hits, chunked prefill."
seed = 11
num_requests = {num_requests}
max_steps = 100000
vocab_size = 32000

[config]
block_size = 16
num_blocks = 160
max_num_batched_tokens = 256
max_num_seqs = 24
max_model_len = 1024

[arrivals]
process = "poisson"
rate = 0.5

[prompt_len]
distribution = "lognormal"
mean = 90
sigma = 0.6
max = 600

[output_len]
distribution = "uniform"
min = 16
max = 96

[[prefix_groups]]
share = 0.5
prefix_len = 64
"""


def traffic(num_requests: int = 160) -> Workload:
    return parse_toml_workload(TRAFFIC.format(num_requests=num_requests), source="traffic")


def record(
    workload: Workload,
    path: Path,
    segment: str,
    retain: str | None = None,
    keep: tuple[str, str | None] | None = None,
) -> Any:
    """The workload recorded into `path`; `keep` is the keep rule's condition and bound."""
    retention = Retention() if retain is None else parse_retention(retain, "--retain")
    rule = (
        None if keep is None else keep_rule((keep[0], "--keep"), (keep[1], "--keep-max"), retention)
    )
    settings = SegmentSettings(parse_segment_every(segment, "--segment"), retention, rule)
    return record_workload(
        workload, TapeModelRunner.for_workload(workload), path, segments=settings
    )


def rows(files: list[Path], sql: str = "SELECT * FROM t") -> list[tuple[Any, ...]]:
    """`sql` over the Parquet files as the table `t`."""
    with duckdb.connect() as con:
        listed = ", ".join(f"'{file}'" for file in files)
        con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet([{listed}])")
        return con.execute(sql).fetchall()


def table_rows(path: Path, table: str, sql: str = "SELECT * FROM t") -> list[tuple[Any, ...]]:
    """`sql` over `table` of the one-file trace at `path`, as the table `t`."""
    with duckdb.connect(str(path), read_only=True) as con:
        con.execute(f"CREATE TEMP VIEW t AS SELECT * FROM {table}")
        return con.execute(sql).fetchall()


def files(folder: Path, table: str) -> list[Path]:
    return [file for segment in scan(folder) for file in segment.files(table)]


def meta(segment_folder: Path) -> dict[str, str]:
    return dict(rows([segment_folder / table_file("_meta")], "SELECT key, value FROM t"))


@pytest.fixture(scope="module")
def one_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("file") / "trace.duckdb"
    workload = traffic()
    record_workload(workload, TapeModelRunner.for_workload(workload), path, checkpoint_every=0)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("folder") / "recording"
    summary = record(traffic(), path, "100steps")
    assert summary.complete
    return path


def test_a_segment_closes_every_n_steps_and_each_later_one_opens_with_a_checkpoint(
    folder: Path, one_file: Path
) -> None:
    segments = scan(folder)
    (num_steps,) = table_rows(one_file, "_steps", "SELECT count(*) FROM t")[0]
    assert [s.first_step for s in segments] == list(range(0, num_steps, 100))
    assert all(s.closed for s in segments)
    for segment in segments:
        facts = meta(segment.folders[0])
        last = min(segment.first_step + 99, num_steps - 1)
        assert facts["segment_first_step"] == str(segment.first_step)
        assert facts["segment_last_step"] == str(last)
        assert facts["segment_end"] == ("closed" if last == num_steps - 1 else "rotated")
        steps = rows(segment.files("_steps"), "SELECT min(step), max(step), count(*) FROM t")
        assert steps == [(segment.first_step, last, last - segment.first_step + 1)]
        checkpoints = (
            rows(segment.files("_checkpoints"), "SELECT step FROM t") if segment.first_step else []
        )
        assert checkpoints == ([(segment.first_step,)] if segment.first_step else [])
    assert read_manifest(folder)["segment"] == "100steps"
    assert writer_pid(folder) is None


def test_the_segments_hold_the_rows_one_file_holds(folder: Path, one_file: Path) -> None:
    for table in ("_steps", "_scheduled", "_block_ids", "_allocations", "_preemptions", "_events"):
        columns = (
            "* EXCLUDE (ended_at_ns, schedule_ns, model_ns, update_ns)"
            if table == "_steps"
            else "*"
        )
        in_file = table_rows(one_file, table, f"SELECT {columns} FROM t ORDER BY ALL")
        in_folder = rows(files(folder, table), f"SELECT {columns} FROM t ORDER BY ALL")
        assert in_folder == in_file, table


def test_each_segment_holds_the_requests_its_checkpoint_names(folder: Path) -> None:
    for segment in scan(folder)[1:]:
        held = {r[0] for r in rows(segment.files("_requests"), "SELECT request_index FROM t")}
        first = segment.first_step
        unfinished = rows(
            segment.files("_checkpoint_requests"),
            f"SELECT request_index FROM t WHERE step = {first}",
        )
        (listed,) = rows(
            segment.files("_checkpoints"),
            "SELECT list_concat(finished_req_indices, preempted_req_indices, "
            f"prev_step_scheduled_req_indices) FROM t WHERE step = {first}",
        )
        arrived = rows(
            segment.files("_events"), "SELECT request_index FROM t WHERE kind = 'arrive'"
        )
        named = {r[0] for r in unfinished} | set(listed[0])
        assert held == named | {r[0] for r in arrived}


def test_token_ids_are_stored_in_four_bytes_and_read_back_as_recorded(
    folder: Path, one_file: Path
) -> None:
    sql = "SELECT DISTINCT request_index, prompt_token_ids FROM t ORDER BY ALL"
    assert rows(files(folder, "_requests"), sql) == table_rows(one_file, "_requests", sql)
    sql = "SELECT step, request_index, sampled_token_id FROM t ORDER BY ALL"
    assert rows(files(folder, "_scheduled"), sql) == table_rows(one_file, "_scheduled", sql)
    scheduled = scan(folder)[0].files("_scheduled")[0]
    with duckdb.connect() as con:
        stored = con.execute(
            "SELECT type FROM parquet_schema(?) WHERE name = 'sampled_token_id'", [str(scheduled)]
        ).fetchall()
    assert stored == [("INT32",)]


def test_retention_deletes_the_oldest_segments_past_the_size_and_keeps_the_newest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kept"
    record(traffic(), path, "50steps", retain="60kB")
    segments = scan(path)
    sizes = [sum(f.stat().st_size for f in s.folders[0].iterdir()) for s in segments]
    assert segments[0].first_step > 0
    assert sum(sizes[1:]) <= 60_000 < sum(sizes) + 100_000
    assert not [p for p in path.iterdir() if p.name.endswith((".open", ".deleting", ".closing"))]


def test_a_segment_retention_chose_is_unlisted_at_once_and_deleted_after_the_grace(
    tmp_path: Path,
) -> None:
    path = tmp_path / "expiring"
    with recording(traffic(), path, "50steps", stop_after=300, retain="60kB"):
        expired = [p for p in path.glob("segment-*") if (p / EXPIRED).exists()]
        listed = {s.folders[0] for s in scan(path)}
        assert expired and not listed & set(expired), "still listed after retention chose it"
        assert all((p / "steps.parquet").is_file() for p in expired), "a reader's files went"
    assert not any(p.exists() for p in expired), "deleted when the writer closed"


def test_a_scan_lists_no_open_folder_of_a_segment_that_closed(tmp_path: Path) -> None:
    """Its open folder stays a grace period after it closed, and after retention chose it."""
    for name in ("segment-000000000000", "segment-000000000010"):
        (tmp_path / name).mkdir()
    (tmp_path / "segment-000000000000" / EXPIRED).touch()
    for name in ("segment-000000000000", "segment-000000000010", "segment-000000000020"):
        (tmp_path / f"{name}.open" / "part-000000").mkdir(parents=True)
    assert [(s.first_step, s.closed) for s in scan(tmp_path)] == [(10, True), (20, False)]


def test_a_keep_rule_spares_the_segments_it_matches_up_to_its_own_bound(tmp_path: Path) -> None:
    """Steps with two preemptions fall in steps 300..399 of this traffic (two segments): they
    outlive retention, which keeps only the newest of the rest; a bound of one segment keeps
    the newer. The recording, with a hole where retention deleted, replays."""
    rule = "num_preemptions >= 2"
    whole = tmp_path / "whole"
    record(traffic(), whole, "50steps", keep=(rule, None))
    matching = {
        s.first_step
        for s in scan(whole)
        if rows(s.files("_steps"), "SELECT max(num_preemptions) FROM t")[0][0] >= 2
    }
    assert matching == {300, 350}
    assert {
        s.first_step for s in scan(whole) if meta(s.folders[0])["segment_kept"] == "true"
    } == matching
    spared = tmp_path / "spared"
    record(traffic(), spared, "50steps", retain="60kB", keep=(rule, "200kB"))
    segments = scan(spared)
    assert [s.first_step for s in segments if s.first_step < 400] == [300, 350]
    unkept = [s for s in segments if s.first_step >= 400]
    assert unkept[0].first_step > 400 and unkept[-1].first_step == 500
    assert sum(folder_bytes(s.folders[0]) for s in unkept[:-1]) <= 60_000
    replayed = subprocess.run(
        [sys.executable, "-m", "stepscope", "replay", str(spared)], capture_output=True, text=True
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    bounded = tmp_path / "bounded"
    record(traffic(), bounded, "50steps", retain="60kB", keep=(rule, "70kB"))
    assert [s.first_step for s in scan(bounded) if s.first_step < 400] == [350]


def test_a_keep_rule_that_fails_on_a_value_keeps_nothing_and_recording_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "failing-rule"
    rule = "CAST(admission_stop AS VARCHAR)::INTEGER > 0"  # binds; no stop reads as a number
    summary = record(traffic(), path, "50steps", retain="60kB", keep=(rule, None))
    assert summary.complete
    assert not any(meta(s.folders[0]).get("segment_kept") == "true" for s in scan(path))
    failures = [r.message for r in caplog.records if "the keep rule" in r.message]
    assert len(failures) == 1 and "recording goes on" in failures[0]


def test_retention_by_age(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1_000_000.0]

    def now() -> float:
        clock[0] += 10.0  # each reading ten seconds on
        return clock[0]

    monkeypatch.setattr("stepscope.tracer.segments.writer.time.time", now)
    path = tmp_path / "aged"
    record(traffic(60), path, "40steps", retain="25s")
    segments = scan(path)
    assert len(segments) <= 2 and segments[-1].closed


class _SecondPerStep:
    """The checkpointer's clock, a second on at each reading (one a step, two when a
    segment opens)."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now

    perf_counter_ns = staticmethod(time.perf_counter_ns)


def test_a_segment_closes_after_its_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("stepscope.tracer.checkpointer.time", _SecondPerStep())
    path = tmp_path / "timed"
    record(traffic(60), path, "30s")
    firsts = [s.first_step for s in scan(path)]
    assert len(firsts) > 2 and all(25 <= b - a <= 35 for a, b in itertools.pairwise(firsts))


def test_the_open_segment_is_readable_in_whole_steps_before_it_closes(tmp_path: Path) -> None:
    workload = traffic(60)
    path = tmp_path / "open"
    settings = SegmentSettings(parse_segment_every("100000steps", "x"))
    recorder = TraceRecorder(path, workload, trace_meta(workload), segments=settings)
    loop = EngineLoop(workload, TapeModelRunner.for_workload(workload), probe=recorder)
    for number, step in enumerate(loop.run()):
        recorder.record_step(step, loop.core.scheduler)
        if number in (40, 80):
            recorder.flush()
            recorder.writer.wait()
            (segment,) = scan(path)
            assert not segment.closed and segment.first_step == 0
            assert rows(segment.files("_steps"), "SELECT count(*), max(step) FROM t") == [
                (number + 1, number)
            ]
            assert writer_pid(path) == os.getpid()
    recorder.close(complete=True)
    (segment,) = scan(path)
    assert segment.closed and writer_pid(path) is None


def test_a_folder_that_is_not_empty_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "taken"
    path.mkdir()
    (path / "notes.txt").write_text("mine")
    with pytest.raises(TraceWriteError, match="already exists and is not empty"):
        SegmentWriter(path, {}, SegmentSettings(parse_segment_every("10steps", "x")))
    assert (path / "notes.txt").read_text() == "mine"
    assert not (path / MANIFEST).exists()


def test_a_recorder_that_falls_behind_drops_steps_and_resumes_at_a_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(background, "BACKLOG_STEPS", 8)
    workload = traffic(120)
    path = tmp_path / "behind"
    settings = SegmentSettings(parse_segment_every("1000000steps", "x"))
    recorder = BackgroundRecorder(
        TraceRecorder(path, workload, trace_meta(workload), segments=settings)
    )
    slow = recorder.recorder.record_step

    def slowed(*args: Any) -> None:
        time.sleep(0.004)  # a disk slower than the engine
        slow(*args)

    recorder.recorder.record_step = slowed  # type: ignore[method-assign]
    loop = EngineLoop(workload, TapeModelRunner.for_workload(workload), probe=recorder)
    Checkpointer.attach(loop, recorder, None, settings.every)
    for step in loop.run():
        recorder.record_step(step, loop.core.scheduler)
        time.sleep(0.001)  # the engine's step: a quarter of the recorder's
    recorder.close(complete=True)
    segments = scan(path)
    assert recorder.num_dropped_steps > 0 and len(segments) > 1
    recorded = sum(rows(s.files("_steps"), "SELECT count(*) FROM t")[0][0] for s in segments)
    assert recorded + recorder.num_dropped_steps == loop.num_steps
    for before, after in itertools.pairwise(segments):
        assert meta(before.folders[0])["segment_end"] == "fell_behind"
        assert int(meta(before.folders[0])["segment_last_step"]) < after.first_step - 1
        assert rows(after.files("_checkpoints"), "SELECT step FROM t") == [(after.first_step,)]


def test_a_recording_that_ends_in_a_gap_is_not_complete_and_says_its_end_was_dropped(
    tmp_path: Path,
) -> None:
    workload = traffic(40)
    path = tmp_path / "ends-behind"
    with recording(workload, path, "1000000steps", gap_at=30):
        pass
    (segment,) = scan(path)
    assert meta(segment.folders[0])["segment_end"] == "fell_behind"
    assert meta(segment.folders[0])["segment_last_step"] == "29"
    with open_trace(path) as trace:
        assert trace.meta["complete"] == "true"  # the run ended; the trace lacks its end
        assert not trace.complete and trace.last_step == 29 and trace.dropped_from == 30
        assert trace.meta["dropped_steps_from"] == "30"


@pytest.mark.slow
def test_kill_9_leaves_closed_segments_and_the_open_ones_parts(tmp_path: Path) -> None:
    workload = tmp_path / "traffic.toml"
    workload.write_text(TRAFFIC.format(num_requests=4000))
    path = tmp_path / "killed"
    child = subprocess.Popen(
        [sys.executable, "-m", "stepscope", "record", str(workload), "-o", str(path),
         "--segment", "400steps"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        segments = scan(path) if path.is_dir() else ()
        if len(segments) >= 3 and not segments[-1].closed and len(segments[-1].folders) >= 2:
            break
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    segments = scan(path)
    assert segments[0].closed and not segments[-1].closed
    steps = [r[0] for r in rows(files(path, "_steps"), "SELECT step FROM t ORDER BY step")]
    assert steps == list(range(len(steps)))
    assert writer_pid(path) is None


def test_a_full_disk_stops_the_recording_and_keeps_every_closed_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stepscope.tracer.segments import writer

    written = []

    def fills_up(table: Any, path: Path) -> None:
        if len(written) >= 60:
            raise OSError(28, "No space left on device")
        written.append(path)
        write_part_file(table, path)

    write_part_file = writer.write_part_file
    monkeypatch.setattr(writer, "write_part_file", fills_up)
    path = tmp_path / "full"
    with pytest.raises(TraceWriteError, match="No space left on device"):
        record(traffic(), path, "40steps")
    segments = scan(path)
    closed = [s for s in segments if s.closed]
    assert closed and all(not p.name.endswith(".tmp") for s in segments for p in s.folders)
    steps = [r[0] for r in rows(files(path, "_steps"), "SELECT step FROM t ORDER BY step")]
    assert steps == list(range(len(steps))) and len(steps) >= 40 * len(closed)
    assert writer_pid(path) is None


def test_the_cli_says_in_one_line_that_the_recording_could_not_be_written(tmp_path: Path) -> None:
    workload = tmp_path / "traffic.toml"
    workload.write_text(TRAFFIC.format(num_requests=400))

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (30_000, 30_000))

    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "record", str(workload), "-o", str(tmp_path / "r"),
         "--segment", "200steps"],
        preexec_fn=small_files, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "writing the recording failed" in line and "File too large" in line


@pytest.mark.parametrize(
    ("retain", "said"),
    [("1B", "keeps 30 steps (350..379) in 1 segment(s)"), ("1GB", None)],
    ids=["trimmed", "whole"],
)
def test_the_cli_says_what_retention_left(tmp_path: Path, retain: str, said: str | None) -> None:
    """The preemption storm's 380 steps in 50-step segments: retention of 1 byte leaves the
    last segment (the closed ones are deleted once the next is closed)."""
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "record", str(STORM), "-o", str(out),
         "--segment", "50steps", "--retain", retain],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"}, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0] == f"recorded 380 steps of 24 requests to {out} ({_mb(out)} MB, complete)"
    if said is None:
        assert len(lines) == 1, lines
    else:
        assert lines[1:] == [f"retention deleted the oldest segments: {out} {said}"]


def test_a_stopped_recording_says_what_retention_left(tmp_path: Path) -> None:
    """SIGTERM after retention has deleted segments: the summary counts every step recorded,
    and its second line says what the folder keeps, as a finished run's does."""
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "stepscope", "record", str(long_workload(tmp_path / "long.json")),
         "-o", str(out), "--segment", "20steps", "--retain", "1B"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "400"},
    )  # fmt: skip
    deadline = time.monotonic() + WAIT_S
    while _first_step_held(out) < 100:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"retention never deleted 100 steps: {process.communicate()}")
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=WAIT_S)
    assert process.returncode == 128 + signal.SIGTERM, stderr
    with open_trace(out) as kept:
        num_kept, first, last = kept.num_steps, kept.first_step, kept.last_step
    num_segments = len(scan(out))
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines == [
        f"stopped by SIGTERM: recorded {last + 1} steps of 16 requests to {out} "
        f"({_mb(out)} MB, incomplete)",
        f"retention deleted the oldest segments: {out} keeps {num_kept} steps "
        f"({first}..{last}) in {num_segments} segment(s)",
    ], (lines, num_kept, first, last)
    assert first >= 100


def test_a_recording_stopped_before_its_first_step_says_so(tmp_path: Path) -> None:
    """`record --segment` stopped before its first step: the folder holds no step, and the
    stop's summary says nothing was recorded (reading it would be an error)."""
    path = tmp_path / "rec"
    workload = traffic(10)
    settings = SegmentSettings(parse_segment_every("20steps", "--segment"))
    TraceRecorder(path, workload, trace_meta(workload), segments=settings).close(complete=False)
    console = Console(file=io.StringIO(), width=400)
    _print_kept(console, path, len(workload.requests), KeyboardInterrupt())
    assert console.file.getvalue() == "interrupted: before the first step; nothing was recorded\n"


def test_a_stop_as_a_segment_opens_keeps_the_last_steps_and_the_final_meta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop held through a rotation lands as the new segment opens, before its first step:
    that segment closes empty, retention keeps the one before it, and the trace's final meta
    (what the run recorded, incomplete) is written."""
    opened = TraceRecorder._open_segment

    def stopped_at_step_100(recorder: TraceRecorder, opening: Any) -> None:
        opened(recorder, opening)
        if opening.step >= 100:
            raise KeyboardInterrupt

    monkeypatch.setattr(TraceRecorder, "_open_segment", stopped_at_step_100)
    path = tmp_path / "rec"
    with pytest.raises(KeyboardInterrupt):
        record(traffic(120), path, "20steps", retain="1B")
    with open_trace(path) as trace:
        assert (trace.first_step, trace.last_step, trace.num_steps) == (80, 99, 20)
        assert trace.meta["num_steps"] == "100" and not trace.complete
    assert [(s.first_step, s.closed) for s in scan(path)] == [(80, True), (100, True)]
    replay = replay_exact(path, window=StepWindow(80))
    assert replay.divergence is None and replay.num_compared_steps == 20


def _first_step_held(folder: Path) -> int:
    """The first step the recording holds while it runs (0 until it holds one)."""
    try:
        with open_trace(folder) as trace:
            return trace.first_step
    except TraceError:  # not begun, or no step in it yet
        return 0


def _mb(folder: Path) -> str:
    return f"{folder_bytes(folder) / 1e6:.2f}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--segment", "5000"], "--segment='5000': expected the steps or the time"),
        (["--retain", "2GB"], "--retain needs --segment"),
        (["--segment", "50steps", "--retain", "2 parsecs"], "--retain='2 parsecs': expected"),
        (["--keep", "num_preemptions > 0"], "--keep needs --segment"),
        (["--segment", "50steps", "--keep-max", "1GB"], "--keep-max needs --keep"),
        (["--segment", "50steps", "--keep", "nope > 0"], "--keep='nope > 0': Binder Error"),
        (
            ["--segment", "50steps", "--keep", "1; COPY t TO 'x'"],
            'Parser Error: syntax error at or near ";"',
        ),
        (["--segment", "50steps", "--keep", "true", "--keep-max", "many"], "expected a size"),
    ],
)
def test_a_malformed_segment_option_is_one_line_and_writes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    workload = tmp_path / "traffic.toml"
    workload.write_text(TRAFFIC.format(num_requests=10))
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "record", str(workload), "-o", str(out), *args],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def _as_schema_11(folder: Path) -> None:
    """Rewrite a recording folder as schema 11 wrote it: no hybrid checkpoint columns."""
    for path in files(folder, "_checkpoint_requests"):
        table = pq.read_table(path)
        path.chmod(0o644)
        pq.write_table(
            table.drop_columns(
                ["group_block_ids", "group_num_cached_blocks", "shared_prefix_boundary"]
            ),
            path,
        )
    for path in files(folder, "_meta"):
        table = pq.read_table(path).to_pylist()
        path.chmod(0o644)
        for row in table:
            if row["key"] == "schema_version":
                row["value"] = "11"
        pq.write_table(pa.Table.from_pylist(table), path)


def test_a_recording_of_an_older_schema_reads_and_replays_from_its_checkpoints(
    folder: Path, tmp_path: Path
) -> None:
    """A flight recorder's folder from before an upgrade stays readable: the columns a
    later version added read as "off" (here: one KV cache group)."""
    older = tmp_path / "recording"
    shutil.copytree(folder, older)
    _as_schema_11(older)
    with open_trace(older) as trace, open_trace(folder) as today:
        assert trace.schema_version == 11
        assert trace.num_steps == today.num_steps
        steps = checkpoint_steps(trace)
        assert steps == checkpoint_steps(today)
        held = read_checkpoint(trace, steps[-1])
        assert held == read_checkpoint(today, steps[-1])
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "replay", str(older), "--from-step", str(steps[-1])],
        capture_output=True,
        text=True,
    )
    assert result.stdout.startswith("identical"), result.stdout + result.stderr


def test_a_recording_older_than_recording_folders_is_refused_in_one_line(
    folder: Path, tmp_path: Path
) -> None:
    older = tmp_path / "recording"
    shutil.copytree(folder, older)
    for path in files(older, "_meta"):
        rows_ = pq.read_table(path).to_pylist()
        path.chmod(0o644)
        pq.write_table(
            pa.Table.from_pylist(
                [{**row, "value": "7"} if row["key"] == "schema_version" else row for row in rows_]
            ),
            path,
        )
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "info", str(older)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "schema version 7; this stepscope reads recordings of versions 8 to" in result.stderr
