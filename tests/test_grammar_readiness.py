"""A live engine's grammar readiness: which step each structured-output request's grammar
was ready at, as the recording learns it, and the trace row it lands in.

vLLM's objects are stood in for by the attributes the recording reads (a request's
status, its `structured_output_request._grammar`, a future while compiling); the
real engine's recording is `test_live_grammar.py`.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import TESTS
from recordings import settings
from stepscope.engine import EngineLoop, TapeModelRunner, load_workload
from stepscope.engine.outputs import EngineCoreOutput
from stepscope.engine.request import FinishReason
from stepscope.replay.exact import replay_exact
from stepscope.tracer.checkpointer import Checkpointer
from stepscope.tracer.export.snapshot import SnapshotWindow, snapshot
from stepscope.tracer.record_workload import trace_meta
from stepscope.tracer.recorder import TraceRecorder
from stepscope.tracer.vllm.attach.grammar_readiness import GrammarReadiness

import stepscope

WORKLOAD = TESTS / "grammar_workloads" / "01_grammar_fcfs_skip.json"


class _Status(enum.Enum):
    WAITING = enum.auto()
    WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR = enum.auto()
    RUNNING = enum.auto()


def _request(request_id: str, grammar: Any = None, *, structured: bool = True) -> Any:
    compiling = Future() if grammar is None else grammar
    return SimpleNamespace(
        request_id=request_id,
        use_structured_output=structured,
        status=_Status.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR if structured else _Status.WAITING,
        structured_output_request=SimpleNamespace(_grammar=compiling) if structured else None,
    )


def _ids(compiling: list[Any]) -> list[str]:
    return [c.request.request_id for c in compiling]


def test_a_grammar_is_ready_at_the_first_schedule_that_finds_it_compiled() -> None:
    grammars = GrammarReadiness()
    request = _request("json")
    grammars.on_arrival(request, 0, readiness_known=False)
    assert grammars.ready_at_schedule_start() == []
    request.structured_output_request._grammar.set_result(object())
    assert _ids(grammars.ready_at_schedule_start()) == ["json"]
    assert grammars.ready_at_schedule_start() == []


def test_a_grammar_compiled_during_schedule_is_ready_at_the_step_that_promoted_it() -> None:
    grammars = GrammarReadiness()
    request = _request("json")
    grammars.on_arrival(request, 3, readiness_known=False)
    assert grammars.promoted_in_schedule() == []
    request.status = _Status.WAITING
    (promoted,) = grammars.promoted_in_schedule()
    assert (promoted.request.request_id, promoted.arrival_step) == ("json", 3)


def test_requests_that_leave_while_compiling_are_never_ready() -> None:
    grammars = GrammarReadiness()
    for request_id in ("aborted", "kept"):
        grammars.on_arrival(_request(request_id), 0, readiness_known=False)
    assert _ids(grammars.left(["aborted", "unknown"])) == ["aborted"]
    assert _ids(grammars.still_compiling()) == ["kept"]
    assert grammars.still_compiling() == []


def test_only_unscripted_structured_requests_are_followed() -> None:
    grammars = GrammarReadiness()
    assert not grammars.on_arrival(_request("plain", structured=False), 0, readiness_known=False)
    assert not grammars.on_arrival(_request("scripted"), 0, readiness_known=True)
    assert grammars.still_compiling() == []
    assert grammars.on_arrival(_request("live"), 0, readiness_known=False)
    assert _ids(grammars.still_compiling()) == ["live"]


def test_an_error_finish_of_a_structured_request_is_a_rejected_token() -> None:
    grammars = GrammarReadiness()
    grammars.on_arrival(_request("json", object()), 0, readiness_known=False)
    grammars.on_arrival(_request("plain", structured=False), 0, readiness_known=False)
    plain_error = EngineCoreOutput("plain", (), FinishReason.ERROR, None)
    assert not grammars.rejected_tokens([plain_error])
    running = EngineCoreOutput("json", (5,), None, None)
    assert not grammars.rejected_tokens([running])
    assert grammars.rejected_tokens([EngineCoreOutput("json", (0,), FinishReason.ERROR, None)])


def test_readiness_learned_after_the_row_was_written_updates_it(tmp_path: Path) -> None:
    """B's row is written (and flushed) at its arrival, its grammar is ready at step 3;
    D's is ready at its arrival step, before its row is written: both rows say so, and
    the trace replays exactly."""
    workload = load_workload(WORKLOAD)
    ready = {s.grammar_ready_step: s.request_id for s in workload.requests if s.grammar_ready_step}
    unscripted = dataclasses.replace(
        workload,
        requests=tuple(dataclasses.replace(s, grammar_ready_step=None) for s in workload.requests),
    )
    path = tmp_path / "t.duckdb"
    recorder = TraceRecorder(path, unscripted, trace_meta(unscripted), flush_every_steps=1)
    loop = EngineLoop(workload, TapeModelRunner.for_workload(workload), probe=recorder)
    for record in loop.run():
        if record.step in ready:
            recorder.grammar_ready(ready[record.step], record.step)
        recorder.record_step(record, loop.core.scheduler)
    recorder.close(complete=True)
    with stepscope.open(path) as trace:
        rows = trace.sql("SELECT request_id, grammar_ready_step FROM _requests").fetchall()
    assert sorted(rows) == [("A", None), ("B", 3), ("C", None), ("D", 2)]
    assert replay_exact(path).divergence is None


@pytest.mark.parametrize("name", ["t.duckdb", "recording"])
def test_a_grammar_still_compiling_holds_its_request_through_every_step_recorded(
    tmp_path: Path, name: str
) -> None:
    """B waits for its grammar from step 0 to 3; the recording stops after step 1, before it
    is ready (what a kill, or a reader of a recording being written, finds): B's row says
    ready at step 2, so a replay holds it through both steps, as the engine did, where
    taking it as waiting for nothing would admit it at once."""
    workload = load_workload(WORKLOAD)
    unscripted = dataclasses.replace(
        workload,
        requests=tuple(dataclasses.replace(s, grammar_ready_step=None) for s in workload.requests),
    )
    path = tmp_path / name
    segments = None if path.suffix else settings("1steps")
    recorder = TraceRecorder(path, unscripted, trace_meta(unscripted), segments=segments)
    loop = EngineLoop(workload, TapeModelRunner.for_workload(workload), probe=recorder)
    if segments is not None:
        Checkpointer.attach(loop, recorder, 0, segments.every)
    recorder.grammar_pending("B")
    steps = loop.run()
    for record in itertools.islice(steps, 2):
        recorder.record_step(record, loop.core.scheduler)
    steps.close()
    recorder.flush()
    if segments is None:
        recorder.close(complete=False)
    else:
        recorder.writer.wait()  # read while it is being written
    query = "SELECT request_id, grammar_ready_step FROM _requests ORDER BY 1"
    with stepscope.open(path) as trace:
        assert trace.sql(query).fetchall() == [("A", None), ("B", 2), ("C", None)]
    assert replay_exact(path).divergence is None
    if segments is not None:  # a snapshot of its last step, taken while it is written
        incident = tmp_path / "incident.duckdb"
        snapshot(path, incident, SnapshotWindow(last_steps=1))
        assert replay_exact(incident).divergence is None
        recorder.close(complete=False)
