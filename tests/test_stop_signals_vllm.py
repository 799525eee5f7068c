"""SIGTERM and SIGHUP stop `record --engine vllm` and `--engine vllm-live` as Ctrl-C does.

vLLM's scheduler, or a whole vLLM engine, runs in the recording process: the stop
must reach it the same way, leave a trace that ends at the last whole step (replayed
identically), and say what was kept. vLLM logs to stderr too; the last line is ours.
A whole engine gets SIGTERM only: both signals take the same path, which the scheduler's
runs show.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from test_crash_safety import long_workload, start_until_recorded
from test_stop_signals import (
    STOPS,
    assert_kept_incomplete,
    nonblank_lines,
    stop_and_wait,
    stop_signals_at_default,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures(stop_signals_at_default.__name__)]

LIVE_WORKLOAD = REPO / "examples" / "workloads" / "vllm_live.toml"


def _record(python: Any, tmp_path: Path, *args: str, num_steps: int) -> tuple[Any, Path]:
    """`stepscope record ARGS -o T` in the vLLM venv, once the file alone holds `num_steps`."""
    trace = tmp_path / "t.duckdb"
    command = [str(python.python), "-m", "stepscope", "record", *args, "-o", str(trace)]
    env = {**os.environ, **python.environment, "PYTHONPATH": str(python.site), "COLUMNS": "400"}
    process = start_until_recorded(
        command, trace, tmp_path, num_steps, env=env, cwd=python.site.parent
    )
    return process, trace


def _assert_said_what_was_kept(stderr: str, signum: int, trace: Path, num_requests: int) -> None:
    with_steps = assert_kept_incomplete(trace, min_steps=1)
    name = signal.Signals(signum).name
    pattern = (
        rf"stopped by {name}: recorded {with_steps} steps of {num_requests} requests to "
        rf"{re.escape(str(trace))} \([0-9.]+ MB, incomplete\)"
    )
    assert re.fullmatch(pattern, nonblank_lines(stderr)[-1]), stderr[-2000:]


@pytest.mark.parametrize("signum", STOPS, ids=lambda s: signal.Signals(s).name)
def test_a_stop_signal_ends_a_vllm_scheduler_recording(
    vllm: Any, tmp_path: Path, signum: int
) -> None:
    workload = long_workload(tmp_path / "long.json")
    process, trace = _record(vllm, tmp_path, str(workload), "--engine", "vllm", num_steps=100)
    stderr = stop_and_wait(process, signum)
    _assert_said_what_was_kept(stderr, signum, trace, num_requests=16)


@pytest.mark.live
def test_sigterm_ends_a_live_vllm_recording(
    vllm_live: Any, tiny_model: Path, tmp_path: Path
) -> None:
    """The bundled live workload with 50 times the requests: minutes of real engine steps."""
    text = LIVE_WORKLOAD.read_text()
    text = text.replace("num_requests = 60", "num_requests = 3000")
    text = text.replace("max_steps = 3000", "max_steps = 100000")
    workload = tmp_path / "live.toml"
    workload.write_text(text)
    engine = ("--engine", "vllm-live", "--engine-arg", "enforce_eager=true")
    args = (str(workload), *engine, "--model", str(tiny_model))
    process, trace = _record(vllm_live, tmp_path, *args, num_steps=1)
    stderr = stop_and_wait(process, signal.SIGTERM)
    _assert_said_what_was_kept(stderr, signal.SIGTERM, trace, num_requests=3000)
