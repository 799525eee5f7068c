"""A server's recorder runs its own threads at the lowest CPU priority; the engine's threads
keep theirs, and so does a recorder asked for normal priority (a driven run's, or a server
with `STEPSCOPE_TRACE_PRIORITY=normal`)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO
from stepscope.engine import load_workload
from stepscope.tracer import thread_priority
from stepscope.tracer.background import BackgroundRecorder
from stepscope.tracer.record_workload import trace_meta
from stepscope.tracer.recorder import TraceRecorder
from stepscope.tracer.segments import SegmentSettings, parse_segment_every
from stepscope.tracer.thread_priority import RECORDER_NICENESS, lower_priority

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's"
)

WORKLOAD = REPO / "tests" / "conformance" / "01_s01_chunked_prefill_split.json"


def nice_of(thread: threading.Thread) -> int:
    assert thread.native_id is not None
    return os.getpriority(os.PRIO_PROCESS, thread.native_id)


def recorder_threads() -> dict[str, threading.Thread]:
    return {t.name: t for t in threading.enumerate() if t.name.startswith("stepscope-")}


@pytest.mark.parametrize("layout", ["one file", "segments"])
@pytest.mark.parametrize("priority", ["low", "normal"])
def test_the_recorder_threads_take_the_priority_asked_for(
    tmp_path: Path, layout: str, priority: str
) -> None:
    segmented, low = layout == "segments", priority == "low"
    engine_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert engine_nice < RECORDER_NICENESS, "run the tests at a priority above the lowest"
    workload = load_workload(WORKLOAD)
    settings = SegmentSettings(parse_segment_every("100steps", "x")) if segmented else None
    path = tmp_path / ("recording" if segmented else "t.duckdb")
    recorder = BackgroundRecorder(
        TraceRecorder(path, workload, trace_meta(workload), segments=settings), low_priority=low
    )
    writer = "stepscope-segment-writer" if segmented else "stepscope-trace-writer"
    try:
        threads = recorder_threads()
        nice = {name: nice_of(threads[name]) for name in ("stepscope-row-builder", writer)}
        expected = RECORDER_NICENESS if low else engine_nice
        assert nice == {"stepscope-row-builder": expected, writer: expected}
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == engine_nice
    finally:
        recorder.close(complete=False)


def test_a_refused_priority_leaves_the_thread_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: int) -> None:
        raise PermissionError("not allowed here")

    monkeypatch.setattr(thread_priority.os, "setpriority", refuse)
    go_on = threading.Event()
    thread = threading.Thread(target=go_on.wait)
    thread.start()
    try:
        before = nice_of(thread)
        lower_priority(thread)
        assert nice_of(thread) == before
    finally:
        go_on.set()
        thread.join()
