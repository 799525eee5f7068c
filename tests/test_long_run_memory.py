"""A long run holds state for the requests still running or waiting, not every arrived one."""

from __future__ import annotations

import dataclasses
import gc
import random
import sys
from pathlib import Path

import pyarrow as pa
from conftest import REPO
from stepscope.engine import EngineLoop, StepRecord, TapeModelRunner, Workload
from stepscope.engine.engine_loop import RequestFinish
from stepscope.engine.request import Request
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.engine.workload import RequestSpec
from stepscope.schema import open_trace
from stepscope.tracer.record_workload import record_workload, trace_meta
from stepscope.tracer.recorder import TraceRecorder
from stepscope.tracer.writer import CHECKPOINT_EVERY_BATCHES, TraceWriter

sys.path.insert(0, str(REPO / "benchmarks"))
from long_run import stream_workload  # the benchmark's workload, made small

_HELD = "SELECT tag, memory_usage_bytes FROM duckdb_memory() WHERE memory_usage_bytes > 0"


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


def test_a_recording_keeps_no_ending_of_a_finished_request(tmp_path: Path) -> None:
    """The trace has every ending; the loop would otherwise hold one per request all run."""
    workload = _workload()
    told = EngineLoop(workload, TapeModelRunner({}), keep_finishes=False)
    for _ in told.run():
        pass
    assert not told.finishes and not told.unfinished
    counted: list[int] = []

    class CountFinishes:
        def on_step(self, record: StepRecord, scheduler: object) -> None:
            if record.step % 10 == 0:
                counted.append(sum(1 for obj in gc.get_objects() if type(obj) is RequestFinish))

    record_workload(workload, TapeModelRunner({}), tmp_path / "t.duckdb", sinks=[CountFinishes()])
    assert len(counted) > 10 and not any(counted)


def test_a_live_recording_lets_go_of_each_request_once_its_row_is_recorded(
    tmp_path: Path,
) -> None:
    """A live engine registers each request as it arrives, prompt and all; a server's
    recording would otherwise hold every prompt it was ever sent."""
    workload = _workload()
    recorder = TraceRecorder(tmp_path / "t.duckdb", Workload(workload.config, ()), {})
    by_id = {spec.request_id: spec for spec in workload.requests}
    planned = {id(spec) for spec in workload.requests}
    loop = EngineLoop(workload, TapeModelRunner({}), probe=recorder)
    held: list[int] = []
    for record in loop.run():
        for request_id in record.arrived:  # a spec of its own, as a live engine makes one
            recorder.register_request(dataclasses.replace(by_id.pop(request_id)))
        recorder.record_step(record, loop.core.scheduler)
        if record.step % 10 == 0:
            gc.collect()
            specs = (obj for obj in gc.get_objects() if type(obj) is RequestSpec)
            held.append(sum(id(spec) not in planned for spec in specs))
    recorder.close(complete=True)
    assert not by_id and len(held) > 10
    assert held == [0] * len(held)
    with open_trace(tmp_path / "t.duckdb") as trace:
        ((prompt_tokens,),) = trace.sql(
            "SELECT sum(len(prompt_token_ids)) FROM requests"
        ).fetchall()
    assert prompt_tokens == sum(len(spec.prompt_token_ids) for spec in workload.requests)


def _batch(rng: random.Random, first_step: int, num_rows: int) -> pa.Table:
    """`_block_ids` rows of random ids: they compress little, so the file grows as written."""
    return pa.table(
        {
            "step": pa.array([first_step + i // 8 for i in range(num_rows)], pa.int32()),
            "request_index": pa.array([i % 8 for i in range(num_rows)], pa.int32()),
            "slot": pa.array([i // 8 for i in range(num_rows)], pa.int32()),
            "block_id": pa.array([rng.randrange(1 << 30) for _ in range(num_rows)], pa.int32()),
        }
    )


def test_the_writer_lets_go_of_the_blocks_it_has_written(tmp_path: Path) -> None:
    """DuckDB would keep every block it writes loaded: the trace's size in memory."""
    path = tmp_path / "t.duckdb"
    writer = TraceWriter(path, {})
    rng = random.Random(3)
    for number in range(CHECKPOINT_EVERY_BATCHES + 2):
        writer.submit({"_block_ids": _batch(rng, number * 40_000, 320_000)})
    writer.set_meta({"note": "all written"}, checkpoint=True)
    writer.wait()
    memory = dict(writer._con.cursor().execute(_HELD).fetchall())
    writer.close(complete=False)
    assert path.stat().st_size > 10 << 20
    assert memory.get("IN_MEMORY_TABLE", 0) == 0
    assert memory.get("BASE_TABLE", 0) < 4 << 20
