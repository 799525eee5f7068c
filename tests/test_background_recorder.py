"""Rows built on a background thread are the rows the recorder builds inline.

A live vLLM engine hands its records to `BackgroundRecorder`; stepscope's own
engine drives it here the same way, so the two traces can be compared table by table.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO
from stepscope.engine import EngineLoop, TapeModelRunner, Workload, load_workload
from stepscope.schema import open_trace
from stepscope.tracer import background
from stepscope.tracer.background import HAND_OVER_STEPS, MAX_HELD_CALLS, BackgroundRecorder
from stepscope.tracer.record_workload import record_workload, trace_meta
from stepscope.tracer.recorder import TraceRecorder
from vllm_env import table_differences

CASES = sorted((REPO / "tests" / "conformance").glob("*.json"))


def tapes(workload: Workload) -> TapeModelRunner:
    return TapeModelRunner({spec.request_id: spec.output_token_ids for spec in workload.requests})


def record_in_background(workload: Workload, path: Path) -> BackgroundRecorder:
    recorder = BackgroundRecorder(TraceRecorder(path, workload, trace_meta(workload)))
    loop = EngineLoop(workload, tapes(workload), probe=recorder)
    for record in loop.run():
        recorder.record_step(record, loop.core.scheduler)
    return recorder


@pytest.mark.parametrize("case", [CASES[2], CASES[15], CASES[29]], ids=lambda p: p.stem)
def test_background_rows_equal_inline_rows(tmp_path: Path, case: Path) -> None:
    workload = load_workload(case)
    inline, background = tmp_path / "inline.duckdb", tmp_path / "background.duckdb"
    record_workload(workload, tapes(workload), inline)
    record_in_background(workload, background).close(complete=True)
    assert table_differences(inline, background) == []
    with open_trace(background) as trace:
        assert trace.meta["complete"] == "true"


def test_a_builder_failure_reaches_the_engine_thread_once(tmp_path: Path) -> None:
    workload = load_workload(CASES[0])
    path = tmp_path / "t.duckdb"
    recorder = BackgroundRecorder(TraceRecorder(path, workload, trace_meta(workload)))

    def fail(spec: object) -> None:
        raise ValueError("no room for this row")

    recorder.recorder.register_request = fail  # type: ignore[method-assign]
    spec = workload.requests[0]
    recorder.register_request(spec)  # fails on the builder thread
    with pytest.raises(ValueError, match="no room"):  # ... and on a later call here
        for _ in range(500):
            recorder.register_request(spec)
            time.sleep(0.01)
    recorder.register_request(spec)  # reported once; later calls go on
    recorder.close(complete=True)  # closing never raises for the builder
    with open_trace(path) as trace:
        assert trace.meta["complete"] == "false"


def test_calls_reach_the_builder_a_step_at_a_time_or_once_enough_are_held(tmp_path: Path) -> None:
    """Handing over wakes the builder, so it happens with steps, not per call: a call made
    between steps waits for the next hand-over (steps, a mark, a wait, the close), and
    no more than `MAX_HELD_CALLS` wait."""
    workload = load_workload(CASES[0])
    recorder = BackgroundRecorder(TraceRecorder(tmp_path / "t.duckdb", workload, {}))
    built: list[str] = []
    recorder.recorder.register_request = lambda spec: built.append(spec.request_id)  # type: ignore[method-assign]
    spec = workload.requests[0]
    for _ in range(MAX_HELD_CALLS - 1):
        recorder.register_request(spec)
    time.sleep(0.2)  # time enough for the builder to take what it had been handed
    assert built == []
    recorder.register_request(spec)  # the MAX_HELD_CALLS-th: handed over without a step
    _wait_for(lambda: len(built) == MAX_HELD_CALLS)
    recorder.register_request(spec)
    recorder.mark(complete=False)
    _wait_for(lambda: len(built) == MAX_HELD_CALLS + 1)
    recorder.close(complete=False)


def test_steps_reach_the_builder_several_at_a_time_or_once_they_have_waited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = load_workload(CASES[29])
    recorder = BackgroundRecorder(TraceRecorder(tmp_path / "t.duckdb", workload, {}))
    built: list[int] = []
    recorder.recorder.record_step = lambda record, *_: built.append(record.step)  # type: ignore[method-assign]
    loop = EngineLoop(workload, tapes(workload), probe=recorder)
    steps = loop.run()
    monkeypatch.setattr(background, "HAND_OVER_WAIT_NS", 60 * 10**9)
    recorder.record_step(next(steps), loop.core.scheduler)  # none held before: handed over
    _wait_for(lambda: len(built) == 1)
    for _ in range(HAND_OVER_STEPS - 1):
        recorder.record_step(next(steps), loop.core.scheduler)
    time.sleep(0.2)  # time enough for the builder to take what it had been handed
    assert len(built) == 1
    monkeypatch.setattr(background, "HAND_OVER_WAIT_NS", 0)  # from the next hand-over on
    recorder.record_step(next(steps), loop.core.scheduler)  # the HAND_OVER_STEPS-th held
    _wait_for(lambda: len(built) == 1 + HAND_OVER_STEPS)
    recorder.record_step(next(steps), loop.core.scheduler)  # held past its wait: at once
    _wait_for(lambda: len(built) == 2 + HAND_OVER_STEPS)
    recorder.close(complete=False)


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the builder never took the calls"
        time.sleep(0.01)
