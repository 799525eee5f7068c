"""A recording killed mid-run: the `.duckdb` file alone holds all but its last few batches."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from stepscope.schema import TraceError
from stepscope.tracer.writer import CHECKPOINT_EVERY_BATCHES
from test_hardening_errors import CLI, ENV
from traces import decode_workload_json

import stepscope as api

FLUSH_EVERY = 16
WAIT_S = 120.0
"""How long to wait for the recording to reach the steps a test needs (a bound, not a pace)."""


def long_workload(path: Path) -> Path:
    """Decoding requests that would take minutes to record: the test stops them long before."""
    path.write_text(decode_workload_json(num_requests=16, num_steps=20_000))
    return path


def steps_in_file_alone(trace: Path, scratch: Path) -> int:
    """Steps a copy of the `.duckdb` file alone holds (0 while it holds none or reads torn)."""
    copy = scratch / "probe.duckdb"
    if not trace.exists():
        return 0
    shutil.copy(trace, copy)
    try:
        with api.open(copy) as opened:
            return opened.num_steps
    except TraceError:
        return 0
    finally:
        copy.unlink()


def start_until_recorded(
    command: list[str], trace: Path, scratch: Path, num_steps: int, **popen: Any
) -> subprocess.Popen[str]:
    """Start `command` (which records `trace`) and wait until the file alone holds `num_steps`."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **({"env": ENV} | popen),
    )
    deadline = time.monotonic() + WAIT_S
    while steps_in_file_alone(trace, scratch) < num_steps:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the recording never held {num_steps} steps: {process.communicate()}")
        time.sleep(0.2)
    return process


def record_until(tmp_path: Path, num_steps: int) -> tuple[subprocess.Popen[str], Path]:
    """Start `stepscope record` and wait until the file alone holds `num_steps` steps."""
    trace = tmp_path / "t.duckdb"
    command = [*CLI, "record", str(long_workload(tmp_path / "long.json")), "-o", str(trace),
               "--flush-every", str(FLUSH_EVERY)]  # fmt: skip
    return start_until_recorded(command, trace, tmp_path, num_steps), trace


def test_after_kill_9_the_duckdb_file_alone_holds_all_but_the_last_batches(
    tmp_path: Path,
) -> None:
    process, trace = record_until(tmp_path, num_steps=300)
    process.kill()
    process.communicate()
    alone, with_wal = tmp_path / "alone", tmp_path / "with_wal"
    alone.mkdir()
    with_wal.mkdir()
    shutil.copy(trace, alone / trace.name)
    shutil.copy(trace, with_wal / trace.name)
    wal = trace.with_name(trace.name + ".wal")
    if wal.exists():
        shutil.copy(wal, with_wal / wal.name)
    with api.open(alone / trace.name) as copied, api.open(with_wal / trace.name) as whole:
        assert not copied.complete and not whole.complete
        assert copied.num_steps >= 300
        # A kill during a checkpoint leaves the one before it: at most two intervals lost.
        assert whole.num_steps - copied.num_steps <= 2 * CHECKPOINT_EVERY_BATCHES * FLUSH_EVERY
        assert copied.config == whole.config


def test_ctrl_c_says_what_was_kept(tmp_path: Path) -> None:
    process, trace = record_until(tmp_path, num_steps=100)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=WAIT_S)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    with api.open(trace) as kept:
        assert not kept.complete
        num_steps = kept.num_steps
    said = " ".join(stderr.split())
    assert f"interrupted: recorded {num_steps} steps of 16 requests to {trace}" in said
    assert "incomplete" in said
    assert not trace.with_name(trace.name + ".wal").exists()
