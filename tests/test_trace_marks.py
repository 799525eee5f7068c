"""A recorder killed without closing leaves the trace as it last marked it.

vLLM's API server kills its engine core right after SIGTERM, so a live recording
commits and marks its trace complete whenever the engine goes idle, and marks it
incomplete again when work comes back. The process here ends with `os._exit`, as a
killed one does: no close, no atexit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TESTS
from stepscope.schema import open_trace

WORKLOAD = TESTS / "conformance_async" / "04_async_aborts_before_update.json"

SCRIPT = """
import os, sys
from pathlib import Path
from stepscope.engine import EngineLoop, TapeModelRunner, parse_workload
from stepscope.tracer.record_workload import trace_meta
from stepscope.tracer.recorder import TraceRecorder

workload = parse_workload(Path(sys.argv[1]).read_text())
tapes = TapeModelRunner({s.request_id: s.output_token_ids for s in workload.requests})
recorder = TraceRecorder(Path(sys.argv[2]), workload, trace_meta(workload))
loop = EngineLoop(workload, tapes, probe=recorder)
records = loop.run()
for _ in range(int(sys.argv[3])):
    recorder.record_step(next(records), loop.core.scheduler)
recorder.mark(complete=True)
for _ in range(int(sys.argv[4])):
    recorder.record_step(next(records), loop.core.scheduler)
if int(sys.argv[4]):
    recorder.mark(complete=False)
recorder.flush()
recorder.writer.wait()
os._exit(0)
"""


def killed_after(tmp_path: Path, idle_steps: int, busy_steps: int) -> Path:
    path = tmp_path / "killed.duckdb"
    subprocess.run(
        [sys.executable, "-c", SCRIPT, str(WORKLOAD), str(path), str(idle_steps), str(busy_steps)],
        check=True,
        timeout=120,
    )
    return path


@pytest.mark.parametrize(("busy_steps", "complete"), [(0, "true"), (3, "false")])
def test_a_killed_recorder_leaves_its_last_mark(
    tmp_path: Path, busy_steps: int, complete: str
) -> None:
    path = killed_after(tmp_path, 4, busy_steps)
    with open_trace(path) as trace:
        assert trace.meta["complete"] == complete
        assert trace.meta["num_steps"] == str(4 + busy_steps)
        ((num_steps,),) = trace.sql("SELECT count(*) FROM _steps").fetchall()
    assert num_steps == 4 + busy_steps
    if complete == "true":
        assert not path.with_name(path.name + ".wal").exists(), "the log was not folded in"
