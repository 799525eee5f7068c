"""`stepscope prune` through the real CLI on real recording folders: what stopped writers left
behind goes, stopped recordings past a retention go oldest first, and nothing a process
writes, no trace file and no newest stopped recording is ever touched."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from recordings import record_folder, recording
from stepscope.schema.recording_layout import folder_bytes, scan
from stepscope.tracer.segments import parse_retention
from stepscope.tracer.segments.prune import prune_in_background
from test_cli import stepscope
from test_hardening_errors import assert_one_line_error
from traces import record

STORM = REPO / "examples" / "preemption_storm" / "workload.json"
DAY_S = 86400


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The storm recorded into 50-step segments, closed."""
    return record_folder(STORM, tmp_path_factory.mktemp("prune") / "storm", "50steps")


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prune-file") / "storm.duckdb"
    record(STORM, path)
    return path


def _copy(recorded: Path, path: Path, *, age_s: float = 0) -> Path:
    """A copy of the recording at `path`, every file in it last written `age_s` ago."""
    shutil.copytree(recorded, path)
    when = time.time() - age_s
    for root, _, files in os.walk(path):
        for name in files:
            os.utime(Path(root) / name, (when, when))
    return path


def _prune(*args: str) -> dict[str, Any]:
    result = stepscope("prune", *args, "--json")
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _deleted(report: dict[str, Any], folder: Path) -> dict[str, str]:
    return {
        str(Path(entry["path"]).relative_to(folder)): entry["reason"] for entry in report["deleted"]
    }


def _listing(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def _num_steps(path: Path) -> int:
    result = stepscope("sql", str(path), "SELECT count(*) AS n FROM steps", "--json")
    assert result.returncode == 0, result.stderr
    return int(json.loads(result.stdout.splitlines()[0])["n"])


def _leave_behind(path: Path) -> list[str]:
    """What a writer killed mid-way leaves (as `info`'s test makes it): a segment retention
    chose, an open segment already merged, a merge and a deletion cut short."""
    first, second = scan(path)[:2]
    (first.folders[0] / ".expired").touch()
    shutil.copytree(second.folders[0], path / "segment-000000000050.open" / "part-000000")
    (path / "segment-000000000100.closing").mkdir()
    (path / "segment-000000000150.open.deleting").mkdir()
    return [
        "segment-000000000000",
        "segment-000000000050.open",
        "segment-000000000100.closing",
        "segment-000000000150.open.deleting",
    ]


def test_what_a_killed_writer_left_behind_goes_and_the_recording_reads_the_same(
    recorded: Path, trace_file: Path, tmp_path: Path
) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    killed = _copy(recorded, traces / "killed")
    left = _leave_behind(killed)
    shutil.copy(trace_file, traces / "file.duckdb")
    steps_before = _num_steps(killed)
    bytes_before = folder_bytes(traces)

    named = " ".join(stepscope("info", str(killed)).stdout.split())
    assert f"stepscope prune {killed} deletes them" in named
    dry = _prune(str(traces), "--dry-run")
    assert _deleted(dry, traces) == {f"killed/{name}": "left behind by its writer" for name in left}
    assert all((killed / name).exists() for name in left), "a dry run deletes nothing"
    assert folder_bytes(traces) == bytes_before

    report = _prune(str(traces))
    assert _deleted(report, traces) == _deleted(dry, traces)
    assert not any((killed / name).exists() for name in left)
    assert report["size_bytes_after"] == folder_bytes(traces)
    info = json.loads(stepscope("info", str(killed), "--json").stdout)
    assert info["recording"]["left_behind"] == []
    assert "left behind" not in stepscope("info", str(killed)).stdout
    assert _num_steps(killed) == steps_before
    assert (traces / "file.duckdb").is_file()
    assert _prune(str(killed))["deleted"] == [], "nothing is left to delete"


def test_stopped_recordings_go_oldest_first_past_the_size_and_the_newest_stays(
    recorded: Path, trace_file: Path, tmp_path: Path
) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    for name, age_days in (("oldest", 3), ("older", 2), ("old", 1), ("newest", 0.5)):
        _copy(recorded, traces / name, age_s=age_days * DAY_S)
    shutil.copy(trace_file, traces / "file.duckdb")
    one = folder_bytes(traces / "oldest")
    # Room for the trace file and two recordings: the two oldest go.
    bound = folder_bytes(traces) - 2 * one + 1
    report = _prune(str(traces), "--retain", f"{bound}B")
    assert _deleted(report, traces) == {
        "oldest": f"the folder holds more than {bound}B",
        "older": f"the folder holds more than {bound}B",
    }
    assert sorted(path.name for path in traces.iterdir()) == ["file.duckdb", "newest", "old"]
    assert folder_bytes(traces) < bound
    assert _num_steps(traces / "old") == _num_steps(recorded)

    report = _prune(str(traces), "--retain", "1B")
    assert _deleted(report, traces) == {"old": "the folder holds more than 1B"}
    assert sorted(path.name for path in traces.iterdir()) == ["file.duckdb", "newest"]


def test_stopped_recordings_last_written_past_the_age_go(recorded: Path, tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    for name, age_days in (("a-week-ago", 7), ("two-days-ago", 2), ("today", 0.1)):
        _copy(recorded, traces / name, age_s=age_days * DAY_S)
    before = _listing(traces)
    dry = _prune(str(traces), "--retain", "1d", "--dry-run")
    assert _listing(traces) == before
    report = _prune(str(traces), "--retain", "2GB,24h")
    reason = "last written more than 1d ago"
    assert _deleted(dry, traces) == {"a-week-ago": reason, "two-days-ago": reason}
    assert _deleted(report, traces) == _deleted(dry, traces)
    assert [path.name for path in traces.iterdir()] == ["today"]


def test_the_newest_stopped_recording_stays_however_old(recorded: Path, tmp_path: Path) -> None:
    """The last crash's recording survives until a newer one exists."""
    traces = tmp_path / "traces"
    traces.mkdir()
    _copy(recorded, traces / "crashed", age_s=30 * DAY_S)
    assert _prune(str(traces), "--retain", "1B,1h")["deleted"] == []
    assert (traces / "crashed").is_dir()
    text = " ".join(stepscope("prune", str(traces), "--retain", "1B").stdout.split())
    assert text.endswith(
        "nothing to delete still over --retain's 1B: what is left is being recorded (each "
        "bounded by its own retention), trace files, or the newest stopped recording"
    )


def test_a_recording_being_written_is_never_touched(recorded: Path, tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    for name, age_days in (("old", 2), ("newer", 1)):
        _copy(recorded, traces / name, age_s=age_days * DAY_S)
    with recording(STORM, traces / "live", "50steps", stop_after=120):
        live_before = _listing(traces / "live")
        os.utime(traces / "live", (0, 0))  # however old it looks
        report = _prune(str(traces), "--retain", "1B,1h")
        assert report["being_recorded"] == [str(traces / "live")]
        assert _deleted(report, traces) == {"old": "last written more than 1h ago"}
        assert _listing(traces / "live") == live_before
        assert _num_steps(traces / "live") == 121
        text = stepscope("prune", str(traces), "--dry-run").stdout
        assert "in 2 recordings (1 being recorded: left alone)" in " ".join(text.split())


def test_a_directory_reached_through_a_link_is_pruned_and_links_inside_are_not_followed(
    recorded: Path, tmp_path: Path
) -> None:
    """/traces/ is often a link to a bigger disk; a link inside it, to a recording elsewhere,
    is not one of its recordings."""
    disk = tmp_path / "disk"
    disk.mkdir()
    _copy(recorded, disk / "old", age_s=2 * DAY_S)
    _copy(recorded, disk / "new")
    elsewhere = _copy(recorded, tmp_path / "elsewhere", age_s=9 * DAY_S)
    (disk / "linked").symlink_to(elsewhere)
    (tmp_path / "traces").symlink_to(disk)
    report = _prune(str(tmp_path / "traces"), "--retain", "1d")
    assert _deleted(report, tmp_path / "traces") == {"old": "last written more than 1d ago"}
    assert sorted(path.name for path in disk.iterdir()) == ["linked", "new"]
    assert _num_steps(elsewhere) == _num_steps(recorded)


def test_a_data_parallel_servers_folder_goes_with_its_last_rank(
    recorded: Path, tmp_path: Path
) -> None:
    traces = tmp_path / "traces"
    for rank in (0, 1):
        _copy(recorded, traces / "vllm-old" / f"rank{rank}", age_s=2 * DAY_S)
        _copy(recorded, traces / "vllm-new" / f"rank{rank}", age_s=0)
    report = _prune(str(traces), "--retain", "24h")
    assert set(_deleted(report, traces)) == {"vllm-old/rank0", "vllm-old/rank1"}
    assert sorted(path.name for path in traces.iterdir()) == ["vllm-new"]
    assert sorted(path.name for path in (traces / "vllm-new").iterdir()) == ["rank0", "rank1"]


def test_a_prune_cut_short_is_never_read_and_the_next_one_finishes_it(
    recorded: Path, trace_file: Path, tmp_path: Path
) -> None:
    """A recording being deleted is renamed first: no reader lists it, whatever is left."""
    traces = tmp_path / "traces"
    traces.mkdir()
    _copy(recorded, traces / "kept")
    shutil.copy(trace_file, traces / "file.duckdb")
    cut_short = _copy(recorded, traces / "gone.deleting")
    shutil.rmtree(scan(cut_short)[0].folders[0])
    listed = json.loads(stepscope("info", str(traces), "--json").stdout)
    assert [trace["name"] for trace in listed["traces"]] == ["file", "kept"]
    report = _prune(str(traces))
    assert _deleted(report, traces) == {"gone.deleting": "a deletion cut short"}
    assert sorted(path.name for path in traces.iterdir()) == ["file.duckdb", "kept"]


def test_names_from_disk_reach_the_terminal_without_control_characters(
    recorded: Path, tmp_path: Path
) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    _copy(recorded, traces / "run-\x1b]0;owned\x07\x1b[31m", age_s=2 * DAY_S)
    _copy(recorded, traces / "today")
    result = stepscope("prune", str(traces), "--retain", "1h")
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "deleted" in result.stdout


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["{missing}"], ["missing", "no such folder"]),
        (["{file}"], ["storm.duckdb", "not a folder"]),
        (["{traces}", "--retain", "lots"], ["--retain", "lots"]),
        (["{traces}", "--retain", "2GB,3GB"], ["--retain"]),
        (["{traces}/one", "--retain", "2GB"], ["--retain", "one recording"]),
    ],
)
def test_bad_input_is_one_line_and_deletes_nothing(
    recorded: Path, trace_file: Path, tmp_path: Path, args: list[str], names: list[str]
) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    _copy(recorded, traces / "one", age_s=2 * DAY_S)
    _leave_behind(traces / "one")
    _copy(recorded, traces / "two")
    before = _listing(traces)
    paths = {"missing": tmp_path / "missing", "file": trace_file, "traces": traces}
    result: subprocess.CompletedProcess[str] = stepscope(
        "prune", *(arg.format(**paths) for arg in args)
    )
    assert_one_line_error(result, *names)
    assert _listing(traces) == before


def test_a_folder_that_cannot_be_deleted_is_one_line_and_says_how_far_it_got(
    recorded: Path, tmp_path: Path
) -> None:
    """`old` cannot be renamed out of the listings: a folder not of stepscope's holds the name."""
    traces = tmp_path / "traces"
    traces.mkdir()
    _copy(recorded, traces / "older", age_s=3 * DAY_S)
    _copy(recorded, traces / "old", age_s=2 * DAY_S)
    _copy(recorded, traces / "new")
    (traces / "old.deleting").mkdir()
    (traces / "old.deleting" / "notes.txt").write_text("someone's")
    result = stepscope("prune", str(traces), "--retain", "1d")
    assert_one_line_error(result, str(traces / "old"), "1 of 2 folders were deleted before it")
    assert sorted(path.name for path in traces.iterdir()) == ["new", "old", "old.deleting"]
    assert (traces / "old.deleting" / "notes.txt").read_text() == "someone's"
    assert _num_steps(traces / "old") == _num_steps(recorded)


def test_a_server_starting_prunes_its_directory_off_its_own_thread(
    recorded: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What `STEPSCOPE_TRACE_PRUNE` does as a vLLM engine starts (its own recording is one
    being written, so it is left alone); a failure is a log line, never raised."""
    traces = tmp_path / "traces"
    traces.mkdir()
    _copy(recorded, traces / "vllm-a", age_s=9 * DAY_S)
    _copy(recorded, traces / "vllm-b", age_s=8 * DAY_S)
    with recording(STORM, traces / "vllm-live", "50steps", stop_after=60):
        caplog.set_level("INFO", logger="stepscope.tracer")
        prune_in_background(traces, parse_retention("20GB,7d", "test")).join()
        assert sorted(path.name for path in traces.iterdir()) == ["vllm-b", "vllm-live"]
        assert (
            f"stepscope: pruned {traces} past 20GB,7d: deleted 1 folders of stopped "
            "recordings, " in caplog.text
        )
    _copy(recorded, traces / "vllm-a", age_s=9 * DAY_S)
    (traces / "vllm-a.deleting").mkdir()  # someone's folder holds the name it is renamed to
    (traces / "vllm-a.deleting" / "notes.txt").write_text("someone's")
    _copy(recorded, traces / "vllm-c")
    caplog.clear()
    prune_in_background(traces, parse_retention("7d", "test")).join()
    assert f"stepscope: pruning {traces} failed: {traces / 'vllm-a'}: cannot delete" in caplog.text
    assert (traces / "vllm-a").is_dir()


def test_info_on_a_folder_of_recordings_totals_the_stopped_ones_and_names_prune(
    recorded: Path, tmp_path: Path
) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    _copy(recorded, traces / "old")
    with recording(STORM, traces / "live", "50steps", stop_after=60):
        text = " ".join(stepscope("info", str(traces)).stdout.split())
        assert "stopped recordings take" not in text, "the one stopped recording stays anyway"
        _copy(recorded, traces / "older")
        text = " ".join(stepscope("info", str(traces)).stdout.split())
    size = (folder_bytes(traces / "old") + folder_bytes(traces / "older")) / 1e6
    assert (
        f"2 stopped recordings take {size:.2f} MB: stepscope prune {traces} --retain "
        "SIZE,AGE deletes the oldest"
    ) in text
