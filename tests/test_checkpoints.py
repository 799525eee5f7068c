"""Checkpoints: the state a trace holds at a step is the state a replay reaches there, and a
replay from it goes on exactly as the recording did.

The corpus is every conformance workload (plain, async, speculative decoding, LoRA,
vLLM 0.32's, hybrid KV cache groups, drafters, the prefill cadence), the grammar waits,
the preemption storm and random workloads of the oracle differential's kinds, each
recorded with a checkpoint every few steps.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from checkpoint_checks import assert_checkpoints_hold
from conftest import REPO, SHARED_CONFORMANCE, TESTS
from random_workloads import random_workload, with_lora, with_spec_decoding
from stepscope.engine import EngineLoop, TapeModelRunner, Workload, load_workload, parse_workload
from stepscope.engine.kv_cache_block import KVCacheBlock
from stepscope.engine.restore import CheckpointError, check_checkpoint
from stepscope.replay.checkpoints import checkpoint_steps, read_checkpoint
from stepscope.replay.diff import diff_traces
from stepscope.replay.exact import replay_exact, verify_checkpoint
from stepscope.replay.from_step import StepWindow
from stepscope.replay.inputs import workload_from_trace
from stepscope.replay.trace_runner import whatif_model_runner
from stepscope.replay.whatif import replay_whatif
from stepscope.schema import open_trace
from stepscope.schema.ddl import table_specs
from stepscope.tracer.checkpoint_rows import checkpoint_tables
from stepscope.tracer.record_workload import record_workload, trace_meta
from stepscope.tracer.recorder import TraceRecorder
from test_next_conformance import MODELLED, SHARED_NEXT

EVERY = 3
"""Steps between checkpoints in the corpus' recordings: most steps of a short case are a
checkpoint or right after one."""

_FOLDERS = (
    TESTS / "conformance",
    TESTS / "conformance_extra",
    TESTS / "conformance_async",
    TESTS / "conformance_spec",
    TESTS / "conformance_lora",
    TESTS / "conformance_v032",
    TESTS / "grammar_workloads",
    SHARED_CONFORMANCE,
    SHARED_CONFORMANCE.parent / "conformance-features",
)


NEXT_MODELLED = sorted(
    path for path in SHARED_NEXT.glob("*.json") if path.name.startswith(MODELLED)
)
"""The scenarios of `../shared/conformance-next/` the engine models (hybrid KV cache groups,
drafters, the prefill cadence)."""


def _random_workloads() -> Iterator[tuple[str, Workload]]:
    for seed in range(12):
        rng = random.Random(seed)
        kind = ("plain", "async", "spec", "lora")[seed % 4]
        raw = random_workload(rng, async_scheduling=kind == "async", late_aborts=seed % 3 == 0)
        if kind == "spec":
            raw = with_spec_decoding(rng, raw)
        elif kind == "lora":
            raw = with_lora(rng, raw)
        yield f"random/{kind}-{seed}", parse_workload(json.dumps(raw), f"random-{seed}")


def _corpus() -> list[pytest.param]:
    cases = [
        pytest.param(path, id=f"{path.parent.name}/{path.stem}")
        for folder in _FOLDERS
        for path in sorted(folder.glob("*.json"))
    ]
    cases += [pytest.param(path, id=f"conformance-next/{path.stem}") for path in NEXT_MODELLED]
    cases.append(pytest.param(REPO / "examples" / "preemption_storm" / "workload.json", id="storm"))
    cases += [pytest.param(workload, id=name) for name, workload in _random_workloads()]
    return cases


CORPUS = _corpus()


def _recorded(case: Path | Workload, folder: Path) -> Path:
    workload = load_workload(case) if isinstance(case, Path) else case
    trace = folder / "trace.duckdb"
    record_workload(workload, TapeModelRunner.for_workload(workload), trace, checkpoint_every=EVERY)
    return trace


def test_a_checkpoints_rows_follow_the_ddl(tmp_path: Path) -> None:
    """Every column of the checkpoint tables is written (an INSERT BY NAME would leave a
    misspelt one NULL), and the queued batch's table is among them (an async run)."""
    trace_path = _recorded(TESTS / "conformance_async" / "01_s20_async_scheduling.json", tmp_path)
    with open_trace(trace_path) as trace:
        state = read_checkpoint(trace, checkpoint_steps(trace)[0])
        request_index = dict(trace.sql("SELECT request_id, request_index FROM requests").fetchall())
    assert state.pending_batch is not None
    tables = checkpoint_tables(state, request_index, take_ns=1)
    specs = {spec.name: spec for spec in table_specs() if spec.name.startswith("_checkpoint")}
    assert tables.keys() == specs.keys()
    for name, table in tables.items():
        assert table.column_names == [column for column, _, _ in specs[name].columns]


def test_a_checkpoint_without_the_prefill_cadence_is_refused_where_it_is_kept(
    tmp_path: Path,
) -> None:
    """A recorder that took no cadence counters (NULL columns) leaves a state the engine
    cannot resume a cadence from: one line, not a replay that quietly diverges."""
    (case,) = [path for path in NEXT_MODELLED if path.name.startswith("84_")]
    trace_path = _recorded(case, tmp_path)
    with open_trace(trace_path) as trace:
        state = read_checkpoint(trace, checkpoint_steps(trace)[-1])
        workload = workload_from_trace(trace, since=state)
    assert state.prefill_cadence is not None
    specs = {spec.request_id: spec for spec in workload.requests}
    without = dataclasses.replace(state, prefill_cadence=None)
    with pytest.raises(CheckpointError, match=r"prefill_schedule_interval: .* does not hold"):
        check_checkpoint(without, workload.config, specs)


def test_the_corpus_is_whole() -> None:
    assert len(CORPUS) > 120
    assert {"conformance-features", "conformance_async", "grammar_workloads"} <= {
        str(case.id).split("/")[0] for case in CORPUS
    }


def _starts(steps: list[int], num_steps: int) -> list[int]:
    """Where to replay a case from: the step after its middle checkpoint (run silently from
    it) and its last checkpoint; each replay runs to the end, so starting at every
    checkpoint would cost the square of the case's length."""
    starts = {steps[len(steps) // 2] + 1, steps[-1]} if steps else set()
    return sorted(step for step in starts if step < num_steps)


@pytest.mark.parametrize("case", CORPUS)
def test_each_checkpoint_is_the_state_a_replay_reaches_and_a_replay_from_one_is_exact(
    case: Path | Workload, tmp_path: Path
) -> None:
    """One recording per case (recording is most of a short case's cost): every checkpoint
    is the state a replay from step 0 reaches there, and a replay from a checkpoint and from
    the step after one goes on exactly as the recording did."""
    trace_path = _recorded(case, tmp_path)
    assert_checkpoints_hold(trace_path)
    with open_trace(trace_path) as trace:
        steps, num_steps = checkpoint_steps(trace), trace.num_steps
    for from_step in _starts(steps, num_steps):
        result = replay_exact(trace_path, window=StepWindow(from_step))
        assert result.divergence is None, (from_step, result.divergence)
        assert result.num_compared_steps == num_steps - from_step
        assert result.checkpoint_step == from_step - from_step % EVERY


def test_a_window_checks_only_its_steps(tmp_path: Path) -> None:
    trace_path = _recorded(REPO / "examples" / "preemption_storm" / "workload.json", tmp_path)
    result = replay_exact(trace_path, window=StepWindow(10, 20))
    assert result.divergence is None and result.num_compared_steps == 11
    with open_trace(trace_path) as trace:
        assert trace.num_steps > 30


# ----- a checkpoint made wrong on purpose ------------------------------------------


def _storm_trace(tmp_path: Path) -> tuple[Path, int]:
    """The storm recorded, and a checkpoint in it with requests running and blocks free."""
    trace_path = _recorded(REPO / "examples" / "preemption_storm" / "workload.json", tmp_path)
    with open_trace(trace_path) as trace:
        for step in checkpoint_steps(trace):
            state = read_checkpoint(trace, step)
            if state.running and len(state.block_pool.free_block_ids) >= 2:
                return trace_path, step
    raise AssertionError("no checkpoint with running requests and two free blocks")


def test_a_free_queue_made_wrong_makes_the_replay_say_the_state_was_wrong(
    tmp_path: Path,
) -> None:
    trace_path, step = _storm_trace(tmp_path)
    with duckdb.connect(str(trace_path)) as con:  # the front two free blocks swap places
        con.execute(
            "UPDATE _checkpoint_blocks SET free_position = 1 - free_position "
            "WHERE step = ? AND free_position IN (0, 1)",
            [step],
        )
    result = replay_exact(trace_path, window=StepWindow(step))
    assert result.divergence is not None
    assert result.checkpoint_step == step
    assert any("free_block_ids" in line for line in result.state_differences)


def test_a_computed_token_count_made_wrong_makes_the_replay_say_the_state_was_wrong(
    tmp_path: Path,
) -> None:
    trace_path, step = _storm_trace(tmp_path)
    with duckdb.connect(str(trace_path)) as con:
        (index,) = con.execute(
            "SELECT min(request_index) FROM _checkpoint_requests "
            "WHERE step = ? AND queue = 'running'",
            [step],
        ).fetchone()
        con.execute(
            "UPDATE _checkpoint_requests SET num_computed_tokens = num_computed_tokens - 1 "
            "WHERE step = ? AND request_index = ?",
            [step, index],
        )
    result = replay_exact(trace_path, window=StepWindow(step))
    assert result.divergence is not None
    assert any("num_computed_tokens" in line for line in result.state_differences)


def test_an_untouched_checkpoint_verifies(tmp_path: Path) -> None:
    trace_path, step = _storm_trace(tmp_path)
    with open_trace(trace_path) as trace:
        assert verify_checkpoint(trace, step) == []


# ----- a what-if from a step ---------------------------------------------------------


@pytest.mark.parametrize(
    "knobs",
    [{"max_num_seqs": 6}, {"max_num_batched_tokens": 64}, {"num_blocks": 61}],
    ids=["max_num_seqs", "max_num_batched_tokens", "num_blocks"],
)
def test_a_what_if_from_a_step_is_one_from_step_0_whose_knobs_take_effect_there(
    knobs: dict[str, int], tmp_path: Path
) -> None:
    """The reference run starts at step 0 under the recorded config and has its scheduler's
    config (and, for more blocks, its pool) changed at the start of step S (a test hook)."""
    trace_path = _recorded(REPO / "examples" / "preemption_storm" / "workload.json", tmp_path)
    from_step = 2 * EVERY + 1  # not a checkpoint: the run from the one before it is silent
    window = StepWindow(from_step)
    windowed = tmp_path / "from-step.duckdb"
    replay_whatif(trace_path, windowed, knobs, window=window)
    reference = tmp_path / "knobs-at-step.duckdb"
    _what_if_with_knobs_at(trace_path, reference, knobs, from_step)
    assert diff_traces(reference, windowed, window=window).identical
    changed = diff_traces(trace_path, windowed, window=window)
    assert changed.first_decision_step is not None  # the knobs did change the run


def _what_if_with_knobs_at(
    trace_path: Path, output: Path, knobs: dict[str, int], step: int
) -> None:
    with open_trace(trace_path) as trace:
        workload = workload_from_trace(trace)
        runner = whatif_model_runner(workload, trace, knobs)
    knobbed = workload.config.with_knobs(knobs)
    recorder = TraceRecorder(output, workload, trace_meta(workload))
    loop = EngineLoop(workload, runner, probe=recorder, keep_finishes=False)

    def knobs_take_effect(at: int) -> None:
        if at == step:
            scheduler = loop.core.scheduler
            scheduler.config = knobbed
            pool = scheduler.kv_cache_manager.block_pool
            extra = [KVCacheBlock(i) for i in range(pool.num_gpu_blocks, knobbed.num_blocks)]
            pool.blocks += extra
            pool.num_gpu_blocks = len(pool.blocks)
            pool.free_block_queue.append_n(extra)
            scheduler.kv_cache_manager.watermark_blocks = knobbed.watermark_blocks

    loop.on_step_start = knobs_take_effect
    for record in loop.run():
        recorder.record_step(record, loop.core.scheduler)
    recorder.close(complete=True)


def test_a_what_if_from_a_step_refuses_a_state_it_cannot_take(tmp_path: Path) -> None:
    trace_path, step = _storm_trace(tmp_path)
    output = tmp_path / "what-if.duckdb"
    with pytest.raises(CheckpointError, match=r"^num_blocks: 3 is fewer than the blocks in use"):
        replay_whatif(trace_path, output, {"num_blocks": 3}, window=StepWindow(step))
    with pytest.raises(CheckpointError, match=r"^block_size: 32 cannot start from a checkpoint"):
        replay_whatif(trace_path, output, {"block_size": 32}, window=StepWindow(step))
    assert not output.exists()
