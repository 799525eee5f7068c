"""SIGTERM and SIGHUP stop `record`, `replay -o`, `export` and `sweep` as Ctrl-C does.

Each command runs as a real subprocess of the CLI and gets the signal mid-run: it must
exit 128 + the signal with no traceback, its trace folded into the `.duckdb` (no
`.wal`) and marked incomplete, and no half-written output or temporary folder left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_crash_safety import WAIT_S, record_until, start_until_recorded
from test_hardening_errors import CLI, ENV
from traces import decode_workload, record

import stepscope as api

STOPS = [signal.SIGTERM, signal.SIGHUP]
WORK_DIR_PREFIX = ".stepscope-sweep-"
WIDE = {**ENV, "COLUMNS": "400"}
"""Wide enough that no line of the commands' output wraps."""


@pytest.fixture(autouse=True)
def stop_signals_at_default() -> Iterator[None]:
    """SIGTERM and SIGHUP at their defaults while a test runs, whatever started the runner:
    under `nohup` SIGHUP is ignored, an ignored signal stays ignored in every child, and the
    commands rightly leave it so."""
    previous = {signum: signal.signal(signum, signal.SIG_DFL) for signum in STOPS}
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def nonblank_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def stop_and_wait(process: subprocess.Popen[str], signum: int) -> str:
    """Send `signum`, wait for the process; it must exit 128 + signum without a traceback."""
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=WAIT_S)
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr
    return stderr


def _wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], what: str) -> None:
    """Poll until `condition` holds (a bound on the wait, never a pace the test relies on)."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"never saw {what}: {process.communicate()}")
        time.sleep(0.05)


def assert_kept_incomplete(trace: Path, min_steps: int) -> int:
    """The trace is whole in its `.duckdb`, says it is incomplete, replays as far as it holds."""
    assert not trace.with_name(trace.name + ".wal").exists()
    with api.open(trace) as kept:
        assert not kept.complete
        num_steps = kept.num_steps
    assert num_steps >= min_steps
    info = subprocess.run([*CLI, "info", str(trace)], capture_output=True, text=True, env=WIDE)
    assert info.returncode == 0, info.stderr
    assert "INCOMPLETE (recording stopped early)" in info.stdout
    replayed = subprocess.run(
        [*CLI, "replay", str(trace)], capture_output=True, text=True, env=WIDE
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert f"identical: {num_steps} of {num_steps} recorded steps" in replayed.stdout
    return num_steps


def assert_said_what_was_kept(stderr: str, signum: int, trace: Path, num_steps: int) -> None:
    (line,) = nonblank_lines(stderr)
    name = signal.Signals(signum).name
    assert line.startswith(f"stopped by {name}: recorded {num_steps} steps of 16 requests to "
                           f"{trace} (")  # fmt: skip
    assert line.endswith(" MB, incomplete)")


@pytest.mark.parametrize("signum", STOPS, ids=lambda s: signal.Signals(s).name)
def test_a_stop_signal_ends_a_recording_as_ctrl_c_does(tmp_path: Path, signum: int) -> None:
    process, trace = record_until(tmp_path, num_steps=100)
    stderr = stop_and_wait(process, signum)
    num_steps = assert_kept_incomplete(trace, min_steps=100)
    assert_said_what_was_kept(stderr, signum, trace, num_steps)


def test_stops_sent_again_and_again_leave_the_trace_as_one_stop_does(tmp_path: Path) -> None:
    """The first stop handled ends the run; the rest, during its cleanup and the exit, are
    ignored: the file is closed whole and the exit status is the first stop's."""
    process, trace = record_until(tmp_path, num_steps=100)
    while process.poll() is None:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            try:
                process.send_signal(signum)
            except ProcessLookupError:
                break
        time.sleep(0.001)
    _, stderr = process.communicate(timeout=WAIT_S)
    assert "Traceback" not in stderr
    num_steps = assert_kept_incomplete(trace, min_steps=100)
    first = {128 + s: s for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    assert process.returncode in first, stderr
    if first[process.returncode] == signal.SIGINT:
        assert nonblank_lines(stderr)[0].startswith(f"interrupted: recorded {num_steps} steps")
    else:
        assert_said_what_was_kept(stderr, first[process.returncode], trace, num_steps)


@pytest.fixture
def handlers_restored() -> Iterator[None]:
    """After a stop the handlers ignore stops until the process exits; give pytest its own."""
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)


def test_a_stop_during_the_cleanup_is_ignored(handlers_restored: None) -> None:
    """In this process: SIGTERM raises, the SIGHUP and SIGINT sent from the cleanup are
    ignored, and the exit status is 143; later stops are ignored too."""
    from stepscope.stop_signals import stop_like_ctrl_c

    cleaned = []
    with pytest.raises(SystemExit) as exit_, stop_like_ctrl_c():
        try:
            signal.raise_signal(signal.SIGTERM)
            cleaned.append("not reached")
        finally:
            signal.raise_signal(signal.SIGHUP)
            signal.raise_signal(signal.SIGINT)
            cleaned.append("cleanup ran to its end")
    assert exit_.value.code == 143
    assert cleaned == ["cleanup ran to its end"]
    signal.raise_signal(signal.SIGTERM)


def test_without_a_stop_the_handlers_are_given_back() -> None:
    from stepscope.stop_signals import stop_like_ctrl_c

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    with stop_like_ctrl_c():
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_stop_inside_a_held_stretch_is_raised_when_it_ends(handlers_restored: None) -> None:
    from stepscope.tracer.held_signals import signals_held

    from stepscope.stop_signals import stop_like_ctrl_c

    seen: list[str] = []
    with pytest.raises(SystemExit) as exit_, stop_like_ctrl_c():
        with signals_held():
            signal.raise_signal(signal.SIGHUP)
            seen.append("the held stretch ran to its end")
        seen.append("not reached")
    assert exit_.value.code == 129
    assert seen == ["the held stretch ran to its end"]


def test_an_ignored_hangup_stays_ignored() -> None:
    """`nohup`: SIGHUP is ignored before the command starts, and stays so while it runs."""
    from stepscope.tracer.held_signals import signals_held

    from stepscope.stop_signals import stop_like_ctrl_c

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_like_ctrl_c(), signals_held():
            signal.raise_signal(signal.SIGHUP)
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def _stop_once_made(make: Callable[..., object]) -> Callable[..., object]:
    """`make` (mkstemp, mkdtemp, NamedTemporaryFile), with a SIGTERM landing the moment it
    has made its file or folder: the one window a stop sent from outside rarely hits."""

    def made_then_stopped(*args: object, **kwargs: object) -> object:
        made = make(*args, **kwargs)
        signal.raise_signal(signal.SIGTERM)
        return made

    return made_then_stopped


def _write_atomically(folder: Path, trace: Path) -> None:
    from stepscope.tracer.export.output import atomic_file

    with atomic_file(folder / "timeline.pftrace") as scratch:
        scratch.write_text("not reached")


def _fill_scratch_folder(folder: Path, trace: Path) -> None:
    from stepscope.tracer.export.output import scratch_folder

    with scratch_folder(folder, ".stepscope-export-") as scratch:
        (scratch / "part.parquet").write_text("not reached")


def _check_output_can_be_written(folder: Path, trace: Path) -> None:
    from stepscope.output_paths import check_outputs, data_file

    check_outputs([data_file("--perfetto", folder / "timeline.pftrace", "a Perfetto trace")], [])


def _take_snapshot(folder: Path, trace: Path) -> None:
    from stepscope.tracer.export.snapshot import SnapshotWindow, snapshot

    snapshot(trace, folder / "incident.duckdb", SnapshotWindow(last_steps=2))


def _as_a_command(write: Callable[[Path, Path], None]) -> Callable[[Path, Path], None]:
    """`write` as a CLI command runs it: inside `stop_like_ctrl_c()`."""
    from stepscope.stop_signals import stops_like_ctrl_c

    return stops_like_ctrl_c(write)


def _sweep(folder: Path, trace: Path) -> None:
    """The CLI's own sweep command (it stops as Ctrl-C does by itself)."""
    from stepscope.cli import app

    command = ["sweep", str(trace), "--grid", "max_num_seqs=1,2", "--jobs", "1",
               "-o", str(folder / "sweep.duckdb")]  # fmt: skip
    app(command, standalone_mode=False)


@pytest.mark.parametrize(
    ("maker", "write"),
    [("mkstemp", _as_a_command(_write_atomically)),
     ("mkdtemp", _as_a_command(_fill_scratch_folder)),
     ("NamedTemporaryFile", _as_a_command(_check_output_can_be_written)),
     ("mkstemp", _as_a_command(_take_snapshot)), ("mkdtemp", _sweep)],
    ids=["export_file", "export_folder", "writable_probe", "snapshot", "sweep_work_folder"],
)  # fmt: skip
def test_a_stop_as_a_scratch_is_made_leaves_nothing_behind(
    handlers_restored: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    maker: str, write: Callable[[Path, Path], None],
) -> None:  # fmt: skip
    import tempfile

    trace = tmp_path / "source.duckdb"  # recorded first: recording makes scratch folders too
    record(decode_workload(2, 4), trace)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(tempfile, maker, _stop_once_made(getattr(tempfile, maker)))
    with pytest.raises(SystemExit) as exit_:
        write(out, trace)
    assert exit_.value.code == 128 + signal.SIGTERM
    assert list(out.iterdir()) == []


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete 20,001-step trace: replaying or exporting it takes seconds."""
    path = tmp_path_factory.mktemp("long") / "long.duckdb"
    record(decode_workload(16, 20_000), path)
    return path


@pytest.mark.parametrize("signum", STOPS, ids=lambda s: signal.Signals(s).name)
def test_a_stopped_replay_leaves_its_output_marked_incomplete(
    long_trace: Path, tmp_path: Path, signum: int
) -> None:
    output = tmp_path / "replayed.duckdb"
    command = [*CLI, "replay", str(long_trace), "-o", str(output)]
    process = start_until_recorded(command, output, tmp_path, num_steps=100, env=WIDE)
    stop_and_wait(process, signum)
    assert not output.with_name(output.name + ".wal").exists()
    with api.open(output) as kept:
        assert not kept.complete
        assert 100 <= kept.num_steps < 20_001


def _frozen_while_writing(
    command: list[str], scratch_of: Callable[[], list[Path]]
) -> subprocess.Popen[str] | None:
    """Run `command` and freeze it (SIGSTOP) once a scratch file of its output shows; None
    if it had finished its output by then."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=WIDE
    )
    deadline = time.monotonic() + WAIT_S
    while not scratch_of() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGSTOP)
    if scratch_of():
        return process
    process.send_signal(signal.SIGCONT)
    process.communicate(timeout=WAIT_S)
    return None


def _stopped_while_writing(command: list[str], scratch_of: Callable[[], list[Path]]) -> None:
    """SIGTERM `command` while it writes its output; it must exit 143 without a traceback.

    A run that finished its output before it froze is run again: the test needs one
    stopped while writing (a bound on attempts, never a timing assertion).
    """
    for _ in range(20):
        process = _frozen_while_writing(command, scratch_of)
        if process is not None:
            process.send_signal(signal.SIGTERM)
            process.send_signal(signal.SIGCONT)
            _, stderr = process.communicate(timeout=WAIT_S)
            assert process.returncode == 128 + signal.SIGTERM, stderr
            assert "Traceback" not in stderr
            return
    pytest.fail("the command always finished its output before it could be stopped")


def test_a_stopped_parquet_export_leaves_nothing_behind(long_trace: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "dataset"
    command = [*CLI, "export", str(long_trace), "--parquet", str(out_dir)]
    _stopped_while_writing(command, lambda: list(out_dir.glob(".stepscope-export-*")))
    assert not out_dir.exists() or list(out_dir.iterdir()) == []


def test_a_stopped_perfetto_export_leaves_nothing_behind(long_trace: Path, tmp_path: Path) -> None:
    output = tmp_path / "timeline.pftrace"
    command = [*CLI, "export", str(long_trace), "--perfetto", str(output)]
    _stopped_while_writing(command, lambda: list(tmp_path.glob(".timeline.pftrace.*")))
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def sweep_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3,001-step trace whose points with few sequences take seconds each."""
    path = tmp_path_factory.mktemp("sweep") / "t.duckdb"
    record(decode_workload(16, 3000), path)
    return path


def _work_dirs(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"{WORK_DIR_PREFIX}*"))


@pytest.mark.parametrize("to_group", [True, False], ids=["terminal_closed", "kill_hup"])
def test_a_sweep_stopped_by_sighup_removes_its_work_folder(
    sweep_trace: Path, tmp_path: Path, *, to_group: bool
) -> None:
    """A closed terminal signals every process of the sweep; `kill -HUP` the sweep alone."""
    out = tmp_path / "out"
    out.mkdir()
    command = [*CLI, "sweep", str(sweep_trace), "--grid", "max_num_seqs=2,3,4,5",
               "--jobs", "2", "-o", str(out / "sweep.duckdb")]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=WIDE,
        start_new_session=True,
    )  # fmt: skip
    _wait_for(
        lambda: any(any(folder.iterdir()) for folder in _work_dirs(out)), process, "a point run"
    )
    if to_group:
        os.killpg(process.pid, signal.SIGHUP)
    else:
        process.send_signal(signal.SIGHUP)
    _, stderr = process.communicate(timeout=WAIT_S)
    assert process.returncode == 128 + signal.SIGHUP, stderr
    assert nonblank_lines(stderr) == []
    assert list(out.iterdir()) == []


def test_a_sweep_removes_work_folders_whose_sweep_is_gone_and_keeps_the_rest(
    sweep_trace: Path, tmp_path: Path
) -> None:
    from stepscope.replay.sweep.work_dir import PREFIX, Owner

    assert PREFIX == WORK_DIR_PREFIX
    host = Owner.this_process().host
    gone_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    with subprocess.Popen(["sleep", "600"]) as running:
        folders = {
            "gone": tmp_path / f"{PREFIX}{host}-{gone_pid}-abcd1234",
            "running": tmp_path / f"{PREFIX}{host}-{running.pid}-abcd1234",
            "other host": tmp_path / f"{PREFIX}elsewhere.example-{gone_pid}-abcd1234",
            "unnamed owner": tmp_path / f"{PREFIX}k3j_x9q2",
        }
        for folder in folders.values():
            folder.mkdir()
            (folder / "point-0.duckdb").write_bytes(b"a point's trace")
        result = subprocess.run(
            [*CLI, "sweep", str(sweep_trace), "--grid", "max_num_seqs=16",
             "-o", str(tmp_path / "sweep.duckdb")],
            capture_output=True, text=True, env=WIDE,
        )  # fmt: skip
        running.kill()
    assert result.returncode == 0, result.stderr
    assert set(_work_dirs(tmp_path)) == {folders[k] for k in ("running", "other host",
                                                              "unnamed owner")}  # fmt: skip
