"""Every command on a recording folder, through the real CLI: what a user reads, and bad
input as one line, exit 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import REPO
from perfetto_reader import read_timeline
from recordings import delete_oldest, record_folder, recording, set_recording_format
from stepscope.schema import open_trace
from stepscope.schema.recording_layout import scan
from stepscope.tui.app import StepscopeApp
from stepscope.tui.trace_source import TraceSource
from stepscope.tui.widgets.diff_banner import DiffBanner
from test_cli import stepscope
from test_hardening_errors import assert_one_line_error
from textual.pilot import Pilot
from traces import record
from tui_support import drive, until

STORM = REPO / "examples" / "preemption_storm" / "workload.json"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("commands")


@pytest.fixture(scope="module")
def recorded(folder: Path) -> Path:
    """The storm recorded into 50-step segments, each after the first opening with a
    checkpoint."""
    return record_folder(STORM, folder / "storm", "50steps")


@pytest.fixture(scope="module")
def whole(folder: Path) -> Path:
    path = folder / "storm.duckdb"
    record(STORM, path, checkpoint_every=50)
    return path


@pytest.fixture(scope="module")
def trimmed(recorded: Path, folder: Path) -> Path:
    """The recording after retention deleted its 4 oldest segments: it starts at step 200."""
    path = folder / "trimmed"
    shutil.copytree(recorded, path)
    assert delete_oldest(path, 4) == 200
    return path


@pytest.fixture(scope="module")
def with_gap(folder: Path) -> Path:
    """The storm with steps 65..99 dropped (its writer fell behind); recording resumes at 100."""
    path = folder / "gap"
    with recording(STORM, path, "50steps", gap_at=65):
        pass
    return path


@pytest.fixture(scope="module")
def ends_behind(folder: Path) -> Path:
    """The storm with every step from 65 on dropped: its writer never caught up."""
    path = folder / "ends-behind"
    with recording(STORM, path, "1000000steps", gap_at=65):
        pass
    return path


def _ok(*args: str) -> subprocess.CompletedProcess[str]:
    result = stepscope(*args)
    assert result.returncode == 0, result.stderr
    return result


def _words(text: str) -> str:
    return " ".join(text.split())


def test_info_shows_the_recording_its_segments_and_its_steps(recorded: Path) -> None:
    text = _words(_ok("info", str(recorded)).stdout)
    assert f"{recorded} " in text and "recording folder, closed complete" in text
    assert "segment 50steps" in text and "segments 8" in text
    assert "0..49 closed" in text and "350..379 closed" in text and "a checkpoint" in text
    assert "steps 0..379" in text
    report = json.loads(_ok("info", str(recorded), "--json").stdout)
    assert report["recording"]["writer"] == "closed"
    assert report["recording"]["settings"]["segment"] == "50steps"
    segments = report["recording"]["segments"]
    assert [s["first_step"] for s in segments] == list(range(0, 380, 50))
    assert segments[-1] | {"size_bytes": 0} == {
        "first_step": 350,
        "last_step": 379,
        "closed": True,
        "num_parts": None,
        "size_bytes": 0,
        "ended_by": "closed",
        "opens_with_checkpoint": True,
        "kept": False,
    }
    assert report["size_bytes"] == sum(s["size_bytes"] for s in segments) + len(
        (recorded / "stepscope_recording.json").read_bytes()
    )
    assert report["checkpoints"] == list(range(50, 380, 50))
    checked = _ok("info", "--check", str(recorded)).stdout
    assert "every block read" in checked


def test_info_summarizes_a_window_and_the_recording_whole(recorded: Path, trimmed: Path) -> None:
    report = json.loads(_ok("info", str(recorded), "--json", "--from-step", "100",
                            "--to-step", "199").stdout)  # fmt: skip
    assert report["window"] == {"from_step": 100, "to_step": 199}
    assert report["trace_steps"] == [0, 379]
    assert (report["first_step"], report["last_step"]) == (100, 199)
    assert report["summary"]["num_steps"] == 100
    assert report["checkpoints"] == [100, 150]
    assert len(report["recording"]["segments"]) == 8, "the recording is described whole"
    assert report["complete"] is True
    with open_trace(recorded) as whole:
        finished = whole.sql(
            "SELECT count(*) FROM _events WHERE kind = 'finish' AND step BETWEEN 100 AND 199"
        ).fetchall()[0][0]
    assert report["summary"]["num_finished"] == finished < 24
    text = _words(_ok("info", str(trimmed), "--from-step", "0", "--to-step", "249").stdout)
    assert "steps 200..249 of 200..379 (the window read)" in text
    whole_report = json.loads(_ok("info", str(recorded), "--json").stdout)
    assert whole_report["window"] is None and whole_report["trace_steps"] == [0, 379]
    assert_one_line_error(stepscope("info", str(trimmed), "--from-step", "100"),
                          f"--from-step 100: {trimmed} has steps 200..379")  # fmt: skip


def test_sql_reads_a_window_of_a_recording(recorded: Path) -> None:
    query = "SELECT count(*), min(step), max(step) FROM steps"
    result = _ok("sql", str(recorded), query, "--csv", "--from-step", "120", "--to-step", "260")
    assert result.stdout.splitlines()[1] == "141,120,260"
    to_end = _ok("sql", str(recorded), "SELECT min(step) FROM _scheduled", "--csv",
                 "--from-step", "300")  # fmt: skip
    assert to_end.stdout.splitlines()[1] == "300"
    for args, message in [
        (["--from-step", "400"], f"--from-step 400: {recorded} has steps 0..379"),
        (["--to-step", "400"], f"--to-step 400: {recorded} has steps 0..379"),
        (["--from-step", "9", "--to-step", "3"], "--to-step 3: it is before --from-step 9"),
        (["--from-step", "-1"], "--from-step -1: a step is 0 or more"),
    ]:
        assert_one_line_error(stepscope("sql", str(recorded), "SELECT 1", *args), message)


def test_info_on_a_folder_being_written_names_the_process(tmp_path: Path) -> None:
    folder = tmp_path / "live"
    with recording(STORM, folder, "50steps", stop_after=120):
        text = _words(_ok("info", str(folder)).stdout)
        assert f"recording folder, being recorded by process {os.getpid()} not complete yet" in text
        assert "INCOMPLETE" not in text and "stopped early" not in text
        assert "100..120 open," in text
        report = json.loads(_ok("info", str(folder), "--json").stdout)
        assert report["recording"]["writer_pid"] == os.getpid()
        assert report["recording"]["segments"][-1]["closed"] is False
        assert (folder / "segment-000000000050.open").is_dir(), "merged, kept a while"
        assert report["recording"]["left_behind"] == [], "its writer will delete it"
        assert not report["complete"]
        replayed = _ok("replay", str(folder), "--from-step", "100")
        assert _words(replayed.stdout).endswith(
            "(a process records into it now: compared the steps it held when read)"
        )
        replayed = json.loads(_ok("replay", str(folder), "--json").stdout)
        assert (replayed["identical"], replayed["being_recorded"]) == (True, True)
        checked = _ok("check", str(folder))
        assert _words(checked.stdout).endswith(
            f"{folder} is being recorded: compared the 121 steps it held when read (0..120)"
        )
    shutil.rmtree(folder / "segment-000000000100")
    (folder / "segment-000000000100.open").mkdir()
    (folder / "segment-000000000100.open" / "part-000000").mkdir()
    text = _words(_ok("info", str(folder)).stdout)
    assert "stopped without closing" in text


def test_info_lists_a_folder_of_traces(recorded: Path, whole: Path, tmp_path: Path) -> None:
    """A server's /traces/: a recording being written, a closed one, a trace file and one
    that is not a trace, a line each; one unreadable member does not hide the others."""
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copytree(recorded, traces / "closed")
    shutil.copy(whole, traces / "file.duckdb")
    (traces / "broken.duckdb").write_bytes(b"not a trace")
    with recording(STORM, traces / "live", "50steps", stop_after=120):
        listed = _ok("info", str(traces))
        report = json.loads(_ok("info", str(traces), "--json").stdout)
    lines = [_words(line) for line in listed.stdout.splitlines()]
    assert lines[0].startswith(f"{traces} a folder of 4 traces ")
    assert lines[1] == "trace state steps MB created_at"
    rows = {line.split()[0]: line for line in lines[2:6]}
    assert rows["broken"].startswith("broken unreadable - 0.00 -")
    assert rows["closed/"].startswith("closed/ complete 0..379 ")
    assert rows["file"].startswith("file complete 0..379 ")
    assert rows["live/"].startswith(f"live/ recording now (pid {os.getpid()}) 0..120 ")
    assert lines[6].startswith(f"broken: {traces / 'broken.duckdb'}: not a readable trace")
    assert lines[-1] == f"one of them: stepscope info {traces} --trace NAME"
    states = {t["name"]: (t["kind"], t["state"], t["num_steps"]) for t in report["traces"]}
    assert states == {
        "broken": ("file", "unreadable", None),
        "closed": ("recording", "complete", 380),
        "file": ("file", "complete", 380),
        "live": ("recording", "recording now", 121),
    }
    assert report["size_bytes"] == sum(t["size_bytes"] for t in report["traces"])
    one = _ok("info", str(traces), "--trace", "closed").stdout
    assert _words(one).startswith(f"{traces / 'closed'} ")


def test_info_names_what_a_killed_writer_left_behind(recorded: Path, tmp_path: Path) -> None:
    """After a kill -9, what the writer had yet to delete stays: a segment retention chose,
    an open segment already merged, a merge and a deletion cut short. No reader lists any
    of it; `info` names it (a writer alive deletes it itself)."""
    path = tmp_path / "killed"
    shutil.copytree(recorded, path)
    first, second = scan(path)[:2]
    (first.folders[0] / ".expired").touch()
    shutil.copytree(second.folders[0], path / "segment-000000000050.open" / "part-000000")
    (path / "segment-000000000100.closing").mkdir()
    (path / "segment-000000000150.open.deleting").mkdir()
    report = json.loads(_ok("info", str(path), "--json").stdout)
    assert [Path(left["path"]).name for left in report["recording"]["left_behind"]] == [
        "segment-000000000000",
        "segment-000000000050.open",
        "segment-000000000100.closing",
        "segment-000000000150.open.deleting",
    ]
    assert (report["first_step"], report["last_step"]) == (50, 379)
    text = _words(_ok("info", str(path)).stdout)
    size = sum(left["size_bytes"] for left in report["recording"]["left_behind"]) / 1e6
    assert (
        f"left behind {size:.2f} MB in 4 folders its writer stopped before deleting (no reader "
        "lists them; deleting them loses nothing): segment-000000000000, "
        "segment-000000000050.open, segment-000000000100.closing, "
        "segment-000000000150.open.deleting"
    ) in text


def test_info_shows_where_a_trimmed_recording_starts_and_its_gaps(
    trimmed: Path, with_gap: Path
) -> None:
    report = json.loads(_ok("info", str(trimmed), "--json").stdout)
    assert (report["first_step"], report["last_step"]) == (200, 379)
    assert "steps 200..379" in _words(_ok("info", str(trimmed)).stdout)
    text = _words(_ok("info", str(with_gap)).stdout)
    assert "not 65..99 (the recorder fell behind and dropped them)" in text
    assert "fell_behind" in text
    report = json.loads(_ok("info", str(with_gap), "--json").stdout)
    assert report["gaps"] == [
        {"first_step": 65, "last_step": 99, "why": "the recorder fell behind and dropped them"}
    ]


def test_sql_reads_a_recording_and_a_set_of_them(recorded: Path, folder: Path) -> None:
    result = _ok("sql", str(recorded), "SELECT count(*) AS n FROM steps", "--json")
    assert json.loads(result.stdout) == {"n": 380}
    server = folder / "traces" / "vllm-20261205T000000-123"
    for rank in (0, 1):
        record_folder(STORM, server / f"rank{rank}", "100steps", meta={"dp_rank": str(rank)})
    query = "SELECT trace, rank, count(*) AS n FROM steps GROUP BY ALL ORDER BY ALL"
    rows = _ok("sql", str(folder / "traces"), query, "--json").stdout.splitlines()
    assert [json.loads(row) for row in rows] == [
        {"trace": "rank0", "rank": 0, "n": 380},
        {"trace": "rank1", "rank": 1, "n": 380},
    ]
    listed = _ok("sql", str(folder / "traces")).stdout
    assert "vllm-20261205T000000-123/rank0" in listed


def test_replay_is_identical_from_step_0_and_from_every_segments_checkpoint(
    recorded: Path,
) -> None:
    result = _ok("replay", str(recorded))
    assert "identical: 380 of 380 recorded steps" in _words(result.stdout)
    for segment in scan(recorded)[1:]:
        step = str(segment.first_step)
        data = json.loads(_ok("replay", str(recorded), "--from-step", step, "--json").stdout)
        assert data["identical"] and data["checkpoint_step"] == segment.first_step, step


def test_a_trimmed_recording_replays_from_its_first_step(trimmed: Path, tmp_path: Path) -> None:
    result = _ok("replay", str(trimmed))
    assert "identical: steps 200..379 (180 compared, from the checkpoint at step 200)" in (
        _words(result.stdout)
    )
    data = json.loads(_ok("replay", str(trimmed), "--from-step", "260", "--json").stdout)
    assert data["identical"] and data["checkpoint_step"] == 250
    assert_one_line_error(
        stepscope("replay", str(trimmed), "--from-step", "20"),
        "--from-step 20",
        "has steps 200..379",
    )
    output = tmp_path / "what-if.duckdb"
    result = stepscope("replay", str(trimmed), "--set", "max_num_seqs=8", "-o", str(output))
    assert result.returncode in (0, 1), result.stderr
    with open_trace(output) as replayed:
        assert replayed.first_step == 200


@pytest.mark.parametrize("order", ["trimmed first", "trimmed second"])
def test_a_trimmed_recording_is_diffed_from_its_first_step(
    trimmed: Path, whole: Path, order: str
) -> None:
    """Against a trace of the whole run, the steps the recording no longer holds are not
    differences: the diff starts at its first step and says so."""
    a, b = (trimmed, whole) if order == "trimmed first" else (whole, trimmed)
    result = _ok("diff", str(a), str(b), "--json")
    assert json.loads(result.stdout)["first_decision_step"] is None
    assert _words(result.stderr) == (
        f"{trimmed} holds steps from 200: compared from step 200 (--from-step to choose)"
    )
    assert "identical" in _ok("diff", str(a), str(b)).stdout
    for option in ("--from-step", "--to-step"):
        assert_one_line_error(
            stepscope("diff", str(a), str(b), option, "150"),
            f"{option} 150",
            f"{trimmed} holds steps 200..379",
        )
    windowed = _ok("diff", str(a), str(b), "--from-step", "250")
    assert "identical" in windowed.stdout and not windowed.stderr


@pytest.fixture(scope="module")
def early(folder: Path) -> Path:
    """The storm recorded up to step 150 only: no step in common with `trimmed`."""
    return record_folder(STORM, folder / "early", "50steps", to_step=150)


def test_traces_that_share_no_step_are_not_diffed(trimmed: Path, early: Path) -> None:
    """A snapshot taken an hour ago against the flight recorder now: retention deleted every
    step the snapshot holds, so there is nothing to compare (not a divergence at each step)."""
    for a, b in ((early, trimmed), (trimmed, early)):
        assert_one_line_error(
            stepscope("diff", str(a), str(b)), "no step is in both", "0..150", "200..379"
        )


def test_a_recording_that_lost_its_end_says_so_and_replays_what_it_holds(
    ends_behind: Path,
) -> None:
    text = _words(_ok("info", str(ends_behind)).stdout)
    assert "recording folder, closed no steps from 65 on (dropped)" in text
    assert "0..64; none from 65 on (the recorder fell behind and dropped them)" in text
    report = json.loads(_ok("info", str(ends_behind), "--json").stdout)
    assert (report["complete"], report["dropped_from"]) == (False, 65)
    text = _words(_ok("replay", str(ends_behind)).stdout)
    assert (
        "identical: 65 of 65 recorded steps replayed with the same decisions (the recorder "
        "fell behind and dropped the steps from 65 on: compared what it holds)"
    ) in text
    data = json.loads(_ok("replay", str(ends_behind), "--json").stdout)
    assert (data["trace_complete"], data["dropped_from"]) == (False, 65)


def test_a_recording_with_a_gap_replays_each_stretch(with_gap: Path, tmp_path: Path) -> None:
    result = _ok("replay", str(with_gap))
    text = _words(result.stdout)
    assert (
        "steps 65..99 were not recorded (the recorder fell behind and dropped them): "
        "replayed again from the checkpoint at step 100"
    ) in text
    assert "identical: 345 of 345 recorded steps" in text
    data = json.loads(_ok("replay", str(with_gap), "--json").stdout)
    assert data["not_recorded"] == [
        {"first_step": 65, "last_step": 99, "why": "the recorder fell behind and dropped them"}
    ]
    assert_one_line_error(
        stepscope("replay", str(with_gap), "--from-step", "70"),
        "--from-step 70",
        "did not record steps 65..99",
        "the next recorded step is 100",
    )
    assert_one_line_error(
        stepscope("replay", str(with_gap), "--set", "max_num_seqs=8"),
        "steps 65..99 were not recorded",
        "within one recorded stretch (0..64, 100..379)",
    )
    output = tmp_path / "kept.duckdb"
    assert_one_line_error(stepscope("replay", str(with_gap), "-o", str(output)), "-o", "gaps")
    assert not output.exists()
    _ok("replay", str(with_gap), "--from-step", "100", "-o", str(output))
    assert output.exists()


def test_diff_check_and_doctor_take_a_recording(recorded: Path, whole: Path) -> None:
    diff = json.loads(_ok("diff", str(recorded), str(whole), "--json").stdout)
    assert diff["first_decision_step"] is None
    windowed = _ok("diff", str(recorded), str(whole), "--from-step", "100", "--to-step", "200")
    assert "identical" in windowed.stdout
    checked = _ok("check", str(recorded), "--json")
    assert json.loads(checked.stdout)["baselines"][0]["result"] == "pass"
    doctor = json.loads(_ok("doctor", str(recorded), "--no-what-if", "--json").stdout)
    assert doctor["trace"] == str(recorded) and doctor["findings"]


def test_check_of_a_trimmed_incomplete_recording_says_what_it_compared(folder: Path) -> None:
    """Stopped at step 299, its oldest 2 segments deleted: the replay runs 100..299 and
    `check` names those steps, not the 300 a recording from step 0 would hold."""
    path = record_folder(STORM, folder / "stopped", "50steps", to_step=299)
    assert delete_oldest(path, 2) == 100
    said = _ok("check", str(path))
    assert _words(said.stdout + said.stderr).endswith(
        f"{path} is incomplete (recording stopped early): compared the 200 steps it holds "
        "(100..299)"
    )
    (baseline,) = json.loads(_ok("check", str(path), "--json").stdout)["baselines"]
    assert (baseline["result"], baseline["steps_held"]) == ("pass", 200)


def test_check_takes_a_window_of_every_baseline(recorded: Path, whole: Path, trimmed: Path) -> None:
    """Steps 120..199 only, each baseline from its recorded state at 120: the figures are
    the window's; a change that decides otherwise first diverges inside it."""
    checked = json.loads(
        _ok("check", str(recorded), str(whole), "--from-step", "120", "--to-step", "199",
            "--json").stdout
    )  # fmt: skip
    for baseline in checked["baselines"]:
        assert baseline["result"] == "pass"
        assert baseline["metrics"]["steps_to_drain"] == [80, 80]
    changed = stepscope("check", str(whole), "--from-step", "120", "--set", "max_num_seqs=4",
                        "--json")  # fmt: skip
    assert changed.returncode == 1, changed.stderr
    (baseline,) = json.loads(changed.stdout)["baselines"]
    assert baseline["first_decision_step"] >= 120
    assert_one_line_error(
        stepscope("check", str(trimmed), "--from-step", "100"), "--from-step 100", "200"
    )


def test_a_trimmed_recording_exports_the_steps_it_holds(trimmed: Path, tmp_path: Path) -> None:
    perfetto = tmp_path / "trimmed.pftrace"
    said = _ok("export", str(trimmed), "--perfetto", str(perfetto))
    assert _words(said.stderr).startswith(f"wrote {perfetto}: 180 steps, ")
    steps = [s.args["step"] for s in read_timeline(perfetto).slices if "step" in s.args]
    assert steps == list(range(200, 380))


def test_export_writes_a_recording_as_the_file_is_written(
    recorded: Path, whole: Path, tmp_path: Path
) -> None:
    out, perfetto = tmp_path / "out", tmp_path / "r.pftrace"
    _ok("export", str(recorded), "--parquet", str(out), "--perfetto", str(perfetto))
    query = "SELECT trace, count(*) AS n FROM scheduled GROUP BY ALL"
    (exported,) = [json.loads(r) for r in _ok("sql", str(out), query, "--json").stdout.splitlines()]
    (file_rows,) = [
        json.loads(r)
        for r in _ok(
            "sql", str(whole), query.replace("trace, ", "'storm' AS trace, "), "--json"
        ).stdout.splitlines()
    ]
    assert exported == file_rows == {"trace": "storm", "n": file_rows["n"]}
    assert perfetto.stat().st_size > 0


def test_sweep_takes_a_recording(recorded: Path, tmp_path: Path) -> None:
    output = tmp_path / "sweep.duckdb"
    _ok("sweep", str(recorded), "--grid", "max_num_seqs=8,24", "-o", str(output), "--jobs", "2")
    query = "SELECT max_num_seqs, num_steps FROM sweep_points ORDER BY 1"
    with duckdb.connect(str(output), read_only=True) as result:
        rows = result.sql(query).fetchall()
    assert rows[-1] == (24, 380) and len(rows) == 2


def test_nothing_is_written_into_or_over_a_recording(recorded: Path, whole: Path) -> None:
    before = sorted(p.relative_to(recorded) for p in recorded.rglob("*"))
    for args in (
        ["replay", str(whole), "-o", str(recorded)],
        ["replay", str(recorded), "-o", str(recorded / "replay.duckdb")],
        ["export", str(whole), "--perfetto", str(recorded / "x.pftrace")],
        ["export", str(recorded), "--parquet", str(recorded / "parquet")],
        ["diff", str(whole), str(recorded), "--markdown", str(recorded / "diff.md")],
    ):
        assert_one_line_error(stepscope(*args), "a recording folder, which only its recorder")
    assert sorted(p.relative_to(recorded) for p in recorded.rglob("*")) == before


def test_the_tui_opens_a_recording_at_its_first_step(trimmed: Path, with_gap: Path) -> None:
    source = TraceSource(trimmed)
    try:
        assert (source.info.first_step, source.info.num_rows) == (200, 380)
        page = source.page(1).to_pylist()  # steps 128..255: not recorded before 200
        assert [row["recorded"] for row in page] == [False] * 72 + [True] * 56
        assert page[72]["step"] == 200
    finally:
        source.close()
    source = TraceSource(with_gap)
    try:
        assert source.info.gaps == (
            "steps 65..99 were not recorded (the recorder fell behind and dropped them)",
        )
    finally:
        source.close()


def test_the_tui_diffs_as_diff_does(trimmed: Path, whole: Path, early: Path) -> None:
    """A trimmed recording against the whole run is compared from its first step, and two
    traces that share no step are not compared, in the TUI as in `stepscope diff`."""

    def banner(pilot: Pilot[Any]) -> str:
        return str(pilot.app.screen.query_one(DiffBanner).render())

    def told(pilot: Pilot[Any]) -> list[str]:
        return [note.message for note in pilot.app._notifications]

    async def from_its_first_step(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: "identical" in banner(pilot))
        assert f"{trimmed} holds steps from 200: compared from step 200" in told(pilot)

    async def not_at_all(pilot: Pilot[Any]) -> None:
        said = f"diff: {early} holds steps 0..150 and {trimmed} steps 200..379: no step is in both"
        await until(pilot, lambda: any(note.startswith(said) for note in told(pilot)))
        assert "divergent" not in banner(pilot)

    drive(StepscopeApp(trimmed, whole), from_its_first_step, size=(200, 40))
    drive(StepscopeApp(early, trimmed), not_at_all, size=(200, 40))


def test_hostile_recordings_are_one_line_errors(recorded: Path, tmp_path: Path) -> None:
    bad_format = tmp_path / "format"
    shutil.copytree(recorded, bad_format)
    set_recording_format(bad_format, 9)
    not_parquet = tmp_path / "not_parquet"
    shutil.copytree(recorded, not_parquet)
    (scan(not_parquet)[3].folders[0] / "scheduled.parquet").write_bytes(b"PAR1 not really")
    linked = tmp_path / "linked"
    shutil.copytree(recorded, linked)
    steps = scan(linked)[2].folders[0] / "steps.parquet"
    steps.unlink()
    steps.symlink_to(recorded / "stepscope_recording.json")
    plain = tmp_path / "plain"
    (plain / "segment-000000000000").mkdir(parents=True)
    for path, names in (
        (bad_format, ["recording format 9 is not one this stepscope reads"]),
        (not_parquet, ["scheduled.parquet: a damaged file of the recording"]),
        (linked, ["steps.parquet is a link"]),
        (plain, [f"{plain}: "]),
    ):
        for command in (["info"], ["sql", "SELECT count(*) FROM scheduled"], ["replay"]):
            assert_one_line_error(stepscope(command[0], str(path), *command[1:]), *names)


def test_a_duckdb_file_being_written_names_the_folder_form(whole: Path, tmp_path: Path) -> None:
    trace = tmp_path / "held.duckdb"
    trace.write_bytes(whole.read_bytes())
    holds_it = "import sys, duckdb; c = duckdb.connect(sys.argv[1]); print(flush=True); input()"
    writer = subprocess.Popen(
        [sys.executable, "-c", holds_it, str(trace)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "\n"
        result = stepscope("info", str(trace))
        assert_one_line_error(
            result,
            "a trace being written",
            "record into a folder to read a recording while it runs",
            "--segment 5000steps",
            "STEPSCOPE_TRACE_SEGMENT",
        )
        assert "damaged" not in result.stderr
    finally:
        writer.communicate("\n", timeout=30)
