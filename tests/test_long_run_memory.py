"""A long run holds state for the requests still running or waiting, not every arrived one."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from conftest import REPO
from stepscope.engine import EngineLoop, TapeModelRunner, Workload
from stepscope.engine.request import Request
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.tracer.record_workload import trace_meta
from stepscope.tracer.recorder import TraceRecorder

sys.path.insert(0, str(REPO / "benchmarks"))
from long_run import stream_workload  # the benchmark's workload, made small


def _workload() -> Workload:
    text = stream_workload(
        num_requests=60, prompt_len=20, output_len=12, max_num_seqs=8, num_blocks=200,
        max_num_batched_tokens=256, max_model_len=256, seed=2,
    )  # fmt: skip
    return parse_toml_workload(text, source="stream")


def _live_requests() -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is Request)


def test_finished_requests_are_let_go_as_the_run_goes_on() -> None:
    workload = _workload()
    loop = EngineLoop(workload, TapeModelRunner({}))
    checked = 0
    for record in loop.run():
        if record.step % 40 == 39:
            scheduler = loop.core.scheduler
            assert _live_requests() == len(scheduler.requests) == len(loop.unfinished)
            checked += 1
    assert checked >= 4
    assert len(loop.finishes) == len(workload.requests)
    assert all(f.output_token_ids for f in loop.final().values())


def test_a_loop_told_so_keeps_no_output_tokens_of_finished_requests() -> None:
    """What a recording or `run`'s table keep of a finished request: its ending, not its tokens."""
    workload = _workload()
    kept = EngineLoop(workload, TapeModelRunner({}))
    lean = EngineLoop(workload, TapeModelRunner({}), keep_output_tokens=False)
    for _ in kept.run():
        pass
    for _ in lean.run():
        pass
    assert all(f.output_token_ids for f in kept.final().values())
    assert not any(f.output_token_ids for f in lean.final().values())
    without_tokens = {
        req_id: (f.finish_step, f.finish_reason, f.num_preemptions, f.stop_reason)
        for req_id, f in kept.final().items()
    }
    assert without_tokens == {
        req_id: (f.finish_step, f.finish_reason, f.num_preemptions, f.stop_reason)
        for req_id, f in lean.final().items()
    }


def test_the_recorder_keeps_nothing_for_finished_requests(tmp_path: Path) -> None:
    workload = _workload()
    recorder = TraceRecorder(tmp_path / "t.duckdb", workload, trace_meta(workload))
    loop = EngineLoop(workload, TapeModelRunner({}), probe=recorder)
    largest = 0
    for record in loop.run():
        recorder.record_step(record, loop.core.scheduler)
        live = len(loop.core.scheduler.requests)
        assert len(recorder._table_lengths) <= live  # block tables of live requests only
        assert len(recorder._schedule_calls) <= 1
        largest = max(largest, live)
    recorder.close(complete=True)
    assert largest < len(workload.requests) // 2


def test_a_synthetic_workload_shares_one_int_per_token_id() -> None:
    tokens = [
        token
        for spec in _workload().requests
        for token in (*spec.prompt_token_ids, *spec.output_token_ids)
    ]
    assert len(tokens) > 1000
    assert len({id(token) for token in tokens}) == len(set(tokens))
