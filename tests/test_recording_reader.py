"""A recording folder read as one trace: the same tables and views as the same workload
recorded into one file, however it is cut into segments, trimmed by retention or still
being written."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REPO, TESTS
from recordings import (
    delete_oldest,
    record_folder,
    record_learning_late,
    recording,
    set_recording_format,
    settings,
)
from stepscope.engine import load_workload
from stepscope.replay.exact import replay_exact
from stepscope.replay.from_step import StepWindow
from stepscope.schema import (
    TraceError,
    logical_tables,
    open_trace,
    open_traces,
    recording_meta,
    view_infos,
)
from stepscope.schema.recording_layout import scan, writer_pid
from stepscope.schema.trace_error import RecordingChangedError, TraceDamagedError
from stepscope.tracer.recorder import TraceRecorder
from stepscope.tracer.redact import Redactor
from traces import case, record

STORM = REPO / "examples" / "preemption_storm" / "workload.json"
GRAMMARS = TESTS / "grammar_workloads" / "01_grammar_fcfs_skip.json"
WALL_CLOCK = ("ended_at_ns", "schedule_ns", "model_ns", "update_ns", "take_ns")
"""Columns of when and how long: they differ between any two runs."""
STEP_TABLES = [t for t in logical_tables() if t not in ("_meta", "_config", "_requests")]
"""The tables whose rows are facts of a step (each has a `step` column)."""


def _rows(trace: Any, relation: str, where: str = "") -> list[tuple[Any, ...]]:
    """The relation's rows without its wall-clock columns, sorted (views order as they
    choose; the rows are what must agree)."""
    columns = [c for c in trace.sql(f"SELECT * FROM {relation} LIMIT 0").columns]
    kept = [c for c in columns if c not in WALL_CLOCK and not c.startswith("mean_")]
    rows = trace.sql(f"SELECT {', '.join(kept)} FROM {relation} {where}").fetchall()
    return sorted(rows, key=repr)


def _same_views(folder: Path, file: Path) -> None:
    with open_trace(folder) as recorded, open_trace(file) as whole:
        assert recorded.num_steps == whole.num_steps
        for table in logical_tables():
            if table != "_meta":
                assert _rows(recorded, table) == _rows(whole, table), table
        for info in view_infos():
            if info.name != "meta":
                assert _rows(recorded, info.name) == _rows(whole, info.name), info.name
        shared = {"schema_version", "engine", "workload", "redacted", "complete", "num_steps"}
        assert {k: recorded.meta[k] for k in shared} == {k: whole.meta[k] for k in shared}


@pytest.fixture(scope="module")
def storm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The storm as a folder of 20-step segments (each after the first opening with a
    checkpoint) and as one file with a checkpoint every 20 steps."""
    folder = tmp_path_factory.mktemp("storm")
    recorded = record_folder(STORM, folder / "recording", "20steps")
    whole = folder / "storm.duckdb"
    record(STORM, whole, checkpoint_every=20)
    return recorded, whole


def test_every_table_and_view_reads_as_the_file_does(storm: tuple[Path, Path]) -> None:
    recorded, whole = storm
    assert len(scan(recorded)) == 19
    _same_views(recorded, whole)
    with open_trace(recorded) as trace:
        assert trace.complete and trace.path == recorded
        assert (trace.first_step, trace.last_step, trace.gaps) == (0, 379, ())
        assert trace.sql("SELECT count(*) FROM _checkpoints").fetchall() == [(18,)]
        assert not any(key.startswith("segment_") for key in trace.meta)


def test_one_segment_and_checkpoints_inside_segments(tmp_path: Path) -> None:
    """A recording in one segment with checkpoints of its own, and a workload with aborts
    in its requests' rows."""
    workload = case("33")
    recorded = record_folder(workload, tmp_path / "recording", "100000steps", checkpoint_every=5)
    whole = tmp_path / "whole.duckdb"
    record(workload, whole, checkpoint_every=5)
    assert len(scan(recorded)) == 1
    _same_views(recorded, whole)


def test_a_redacted_recording_keeps_its_eight_byte_pseudonyms(tmp_path: Path) -> None:
    """A redacted recording's token ids are 63-bit pseudonyms, stored in 8 bytes, but a
    segment that holds none of a table's is stored in 4: read together, each keeps its
    value. Its segments open without checkpoints (its block hashes are of tokens it does
    not hold)."""
    recorded = record_folder(STORM, tmp_path / "recording", "20steps", redactor=Redactor(b"k" * 32))
    whole = tmp_path / "whole.duckdb"
    record(STORM, whole, redactor=Redactor(b"k" * 32), checkpoint_every=0)
    _same_views(recorded, whole)
    # The first segment as the writer stores one that sampled no token: in 4 bytes.
    first = scan(recorded)[0].folders[0] / "scheduled.parquet"
    rows = pq.read_table(first)
    index = rows.schema.get_field_index("sampled_token_id")
    pq.write_table(
        rows.set_column(index, "sampled_token_id", pa.nulls(len(rows), pa.int32())), first
    )
    with open_trace(recorded) as trace, open_trace(whole) as file:
        assert trace.meta["redacted"] == "true"
        later = "WHERE step >= 20"
        assert _rows(trace, "_scheduled", later) == _rows(file, "_scheduled", later)
        assert trace.sql("SELECT max(sampled_token_id) FROM scheduled").fetchall()[0][0] > 2**31


def test_grammars_ready_after_a_request_was_recorded_update_its_row(tmp_path: Path) -> None:
    """A live engine learns a grammar's readiness late: B's row is written at its arrival
    (step 0), in the first segment, and its grammar is ready at step 3, two segments on. It
    is stored in `request_grammars` and read into `_requests`, as in one file; the recording
    replays exactly, whole and from each segment's checkpoint."""
    workload = load_workload(GRAMMARS)
    ready = {s.grammar_ready_step: s.request_id for s in workload.requests if s.grammar_ready_step}
    unscripted = dataclasses.replace(
        workload,
        requests=tuple(dataclasses.replace(s, grammar_ready_step=None) for s in workload.requests),
    )

    def learn(recorder: TraceRecorder, step: int) -> None:
        if step in ready:
            recorder.grammar_ready(ready[step], step)

    folder, file = tmp_path / "recording", tmp_path / "whole.duckdb"
    for path in (folder, file):
        record_learning_late(workload, unscripted, path, "1steps", learn)
    assert any(s.files("request_grammars") for s in scan(folder))
    query = "SELECT request_id, grammar_ready_step FROM _requests ORDER BY 1"
    with open_trace(folder) as recorded, open_trace(file) as whole:
        rows = recorded.sql(query).fetchall()
        assert rows == whole.sql(query).fetchall()
    assert rows == [("A", None), ("B", 3), ("C", None), ("D", 2)]
    assert replay_exact(folder).divergence is None
    for segment in scan(folder)[1:]:
        replay = replay_exact(folder, window=StepWindow(segment.first_step))
        assert replay.divergence is None, segment.first_step


def test_a_recording_of_the_first_format_is_read(storm: tuple[Path, Path], tmp_path: Path) -> None:
    """A folder written before `request_grammars` files (format 1) reads as it did."""
    folder, file = storm
    older = tmp_path / "older"
    shutil.copytree(folder, older)
    set_recording_format(older, 1)
    _same_views(older, file)


def test_aborts_learned_after_a_request_was_recorded_update_its_row(tmp_path: Path) -> None:
    """A live engine learns an abort after the request's row is written: it is stored in
    `request_aborts` (the last of a request's applies), and read into `_requests`."""
    workload = load_workload(case("33"))
    unaware = dataclasses.replace(
        workload,
        requests=tuple(
            dataclasses.replace(spec, abort_step=None, abort_before_update=False)
            for spec in workload.requests
        ),
    )
    aborted = [spec for spec in workload.requests if spec.abort_step is not None]
    assert aborted
    for path in (tmp_path / "recording", tmp_path / "whole.duckdb"):
        record_learning_late(workload, unaware, path, "5steps")
    assert any(s.files("request_aborts") for s in scan(tmp_path / "recording"))
    with open_trace(tmp_path / "recording") as recorded, open_trace(tmp_path / "whole.duckdb") as w:
        query = "SELECT request_id, abort_step, abort_before_update FROM requests ORDER BY 1"
        rows = recorded.sql(query).fetchall()
        assert rows == w.sql(query).fetchall()
        assert {r[0] for r in rows if r[1] is not None} <= {s.request_id for s in aborted}
        assert any(r[1] is not None for r in rows)


def test_retention_leaves_the_rows_from_its_first_step_on(storm: tuple[Path, Path]) -> None:
    recorded, whole = storm
    trimmed = recorded.parent / "trimmed"
    shutil.copytree(recorded, trimmed)
    first = delete_oldest(trimmed, 10)
    with open_trace(trimmed) as trace, open_trace(whole) as file:
        assert (trace.first_step, trace.last_step) == (first, 379) == (200, 379)
        assert trace.num_steps == 180 and trace.gaps == ()
        for table in STEP_TABLES:
            where = f"WHERE step >= {first}"
            assert _rows(trace, table) == _rows(file, table, where), table
        # Only requests unfinished at step 200 or arriving later are left, rows as recorded.
        assert 0 < len(_held_requests(trace)) < 24
        assert _rows(trace, "_requests") == _rows(file, "_requests", _among(trace))
        trace.check_keys()  # requests numbered with holes, every reference to one held


def _held_requests(trace: Any) -> list[int]:
    return [row[0] for row in trace.sql("SELECT request_index FROM requests").fetchall()]


def _among(trace: Any) -> str:
    """A WHERE clause: the requests `trace` holds."""
    return f"WHERE request_index IN ({', '.join(map(str, _held_requests(trace)))})"


def test_a_recording_read_while_it_is_written(tmp_path: Path) -> None:
    """The open segment's parts are read as they are written: whole steps, up to the last
    one flushed, while the writer holds the folder's lock."""
    whole = tmp_path / "whole.duckdb"
    record(STORM, whole, checkpoint_every=50)
    folder = tmp_path / "recording"
    with recording(STORM, folder, "50steps", stop_after=130):
        assert writer_pid(folder) == os.getpid()
        segments = scan(folder)
        assert [s.closed for s in segments] == [True, True, False]
        assert len(segments[-1].folders) >= 1
        with open_trace(folder) as trace, open_trace(whole) as file:
            assert not trace.complete
            assert (trace.first_step, trace.last_step) == (0, 130)
            for table in STEP_TABLES:
                assert _rows(trace, table) == _rows(file, table, "WHERE step <= 130"), table
            assert _rows(trace, "_requests") == _rows(file, "_requests", _among(trace))
    assert writer_pid(folder) is None


def test_a_gap_is_steps_missing_and_says_why(tmp_path: Path) -> None:
    folder = tmp_path / "recording"
    with recording(STORM, folder, "20steps", gap_at=65):
        pass
    with open_trace(folder) as trace:
        (gap,) = trace.gaps
        assert (gap.first_step, gap.last_step, gap.fell_behind) == (65, 79, True)
        assert gap.describe() == (
            "steps 65..79 were not recorded (the recorder fell behind and dropped them)"
        )
        assert trace.num_steps == 380 - 15
        assert trace.sql("SELECT count(*) FROM steps WHERE step BETWEEN 65 AND 79").fetchall() == [
            (0,)
        ]
        trace.check_keys()


def test_a_set_of_recordings_names_each_by_its_folder_and_rank(tmp_path: Path) -> None:
    server = tmp_path / "traces" / "vllm-20261205T0000-123"
    for rank in (0, 1):
        record_folder(STORM, server / f"rank{rank}", "100steps", meta={"dp_rank": str(rank)})
    record(case("01"), tmp_path / "traces" / "other.duckdb")
    with open_traces([tmp_path / "traces"]) as traces:
        assert traces.names == ["other", "rank0", "rank1"]
        rows = traces.sql(
            "SELECT trace, rank, count(*) FROM steps GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        assert rows[1:] == [("rank0", 0, 380), ("rank1", 1, 380)]
        # Never searched inside: a recording's segments are not traces of the set.
        assert len(traces.traces) == 3


def test_a_vanished_file_says_the_recording_changed(storm: tuple[Path, Path]) -> None:
    recorded, _ = storm
    copy = recorded.parent / "vanishing"
    shutil.copytree(recorded, copy)
    with open_trace(copy) as trace:
        shutil.rmtree(scan(copy)[0].folders[0])
        with pytest.raises(RecordingChangedError) as caught:
            trace.sql("SELECT count(*) FROM scheduled").fetchall()
    message = str(caught.value)
    assert (
        "the recording changed while it was read" in message and "run the command again" in message
    )
    assert "\n" not in message


def test_opening_scans_again_once_when_a_segment_goes_meanwhile(
    storm: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention deletes the oldest segment after the scan listed its files, before they
    are read: the reader scans the folder again and opens what is there now."""
    recorded, _ = storm
    copy = recorded.parent / "retained"
    shutil.copytree(recorded, copy)
    read_rows = recording_meta._meta_rows
    listed: list[list[str]] = []

    def delete_then_read(con: Any, files: list[str]) -> Any:
        if not listed:
            shutil.rmtree(Path(files[0]).parent)
        listed.append(files)
        return read_rows(con, files)

    monkeypatch.setattr(recording_meta, "_meta_rows", delete_then_read)
    with open_trace(copy) as trace:
        assert (trace.first_step, trace.num_steps) == (20, 360)
    assert [Path(files[0]).parent.name for files in listed] == [
        "segment-000000000000",
        "segment-000000000020",
    ]


def test_a_recording_with_no_step_yet_is_one_line(tmp_path: Path) -> None:
    """While its writer holds it, a reader is told to try again; once it has stopped with
    no step (a stop before the first), that it never will hold one."""
    folder = tmp_path / "recording"
    recorder = TraceRecorder(folder, load_workload(STORM), {}, segments=settings("50steps"))
    try:
        with pytest.raises(TraceError, match="a recording with no step in it yet"):
            open_trace(folder)
    finally:
        recorder.close(complete=False)
    with pytest.raises(TraceError, match="a recording that holds no step: it stopped before any"):
        open_trace(folder)


@pytest.mark.parametrize("damage", ["format", "not_parquet", "link", "link_segment"])
def test_hostile_recordings_are_one_line_errors(storm: tuple[Path, Path], damage: str) -> None:
    recorded, _ = storm
    copy = recorded.parent / f"hostile-{damage}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(recorded, copy)
    steps = scan(copy)[1].folders[0] / "steps.parquet"
    if damage == "format":
        set_recording_format(copy, 9)
        expected, kind = "recording format 9 is not one this stepscope reads", TraceError
    elif damage == "not_parquet":
        steps.write_bytes(b"not parquet at all, " * 10)
        expected, kind = f"{steps.resolve()}: a damaged file of the recording", TraceDamagedError
    elif damage == "link":
        steps.unlink()
        steps.symlink_to(scan(copy)[2].folders[0] / "steps.parquet")
        expected, kind = "is a link", TraceError
    else:
        (copy / "segment-000000009999").symlink_to(scan(copy)[0].folders[0])
        expected, kind = "is a link", TraceError
    with pytest.raises(kind) as caught, open_trace(copy) as trace:
        trace.read_all()
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_a_path_duckdb_would_read_as_a_pattern_is_refused(storm: tuple[Path, Path]) -> None:
    """`storm[1]` as a pattern matches `storm1`: refused rather than read from elsewhere."""
    recorded, _ = storm
    copy = recorded.parent / "storm[1]"
    shutil.copytree(recorded, copy)
    with pytest.raises(TraceError, match=r"DuckDB takes them as a pattern"):
        open_trace(copy)
