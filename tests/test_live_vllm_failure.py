"""A recording that fails inside a real vLLM server: the server goes on, the trace stays.

The server records onto a 4 MiB tmpfs; after a first load the disk is filled, so
the next write of the trace fails with ENOSPC. The recorder must say so once and
stop recording; the server must keep answering; the steps written before the disk
filled must still read.
"""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from live_server import LiveServer, client
from stepscope.schema import open_trace

pytestmark = pytest.mark.live

FAILURE_LINE = "stepscope: recording failed"


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    mount = tmp_path_factory.mktemp("small-disk")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=False)


def fill(disk: Path) -> None:
    """Write zeros until the disk says it is full."""
    chunk = bytes(64 * 1024)
    with (disk / "filler").open("wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
        except OSError as error:
            assert error.errno == errno.ENOSPC, error


def wait_until_written(trace: Path) -> None:
    """Wait until the engine, idle after a load, has had its trace marked complete: the
    recorder's builder thread does that a little after the last step (it folds the
    write-ahead log into the file, which removes the log)."""
    wal = trace.with_name(trace.name + ".wal")
    deadline = time.monotonic() + 60
    while wal.exists():
        assert time.monotonic() < deadline, "the first load's steps were never written"
        time.sleep(0.05)


@dataclass(frozen=True)
class FailedRun:
    trace: Path
    before: dict[str, int]
    during: dict[str, int]
    after: dict[str, int]
    log: str


@pytest.fixture(scope="module")
def failed_run(
    vllm_live: Any, tiny_model: Path, small_disk: Path, tmp_path_factory: pytest.TempPathFactory
) -> FailedRun:
    trace = small_disk / "server.duckdb"
    server = LiveServer.start(
        vllm_live,
        tiny_model,
        trace,
        "stepscope.tracer.vllm.RecordingScheduler",
        log_dir=tmp_path_factory.mktemp("failing-server-log"),
    )
    try:
        before = client(vllm_live, server, "--requests", "24", "--cancel-every", "0")
        wait_until_written(trace)
        fill(small_disk)
        during = client(vllm_live, server, "--requests", "24", "--seed", "1")
        after = client(vllm_live, server, "--requests", "24", "--seed", "2", "--cancel-every", "0")
    finally:
        server.stop(signal.SIGTERM)
    (small_disk / "filler").unlink()
    return FailedRun(trace, before, during, after, server.log_tail(500_000))


def test_the_server_keeps_answering(failed_run: FailedRun) -> None:
    assert failed_run.before["failed"] == 0
    assert failed_run.during["failed"] == 0
    assert failed_run.after == {"finished": 24, "cancelled": 0, "failed": 0, "planned_hang_ups": 0}


def test_the_failure_is_logged_once(failed_run: FailedRun) -> None:
    assert failed_run.log.count(FAILURE_LINE) == 1, failed_run.log[-5000:]
    assert "No space left on device" in failed_run.log


def test_the_steps_so_far_stay_readable(failed_run: FailedRun) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "info", str(failed_run.trace)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    with open_trace(failed_run.trace) as trace:
        ((num_steps,),) = trace.sql("SELECT count(*) FROM _steps").fetchall()
        ((num_requests,),) = trace.sql("SELECT count(*) FROM _requests").fetchall()
    assert num_steps > 0
    assert num_requests >= 24
    assert num_requests < 72, "the requests after the failure were recorded"
