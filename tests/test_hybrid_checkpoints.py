"""Checkpoints of hybrid KV cache groups: every group's block table (a window's null entries
included) is held, a replay from any checkpoint goes on exactly as the recording did, a
damaged one is one line, and a hybrid run records as a folder of segments.

The corpus is the hybrid scenarios of `../shared/conformance-next/` (sliding window,
chunked local attention, Gemma-style groups, EAGLE-3 with async scheduling) and random
workloads with random groups.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import duckdb
import pytest
from checkpoint_checks import assert_checkpoints_hold
from random_workloads import random_workload, with_hybrid_groups
from stepscope.engine import TapeModelRunner, load_workload, parse_workload
from stepscope.engine.checkpoint import RequestCheckpoint, SchedulerCheckpoint
from stepscope.engine.restore import CheckpointError, check_checkpoint
from stepscope.replay.checkpoints import checkpoint_steps, read_checkpoint
from stepscope.replay.diff import diff_traces
from stepscope.replay.exact import replay_exact
from stepscope.replay.from_step import StepWindow
from stepscope.replay.inputs import recorded_config, workload_from_trace
from stepscope.replay.whatif import replay_whatif
from stepscope.schema import open_trace
from stepscope.schema.recording_layout import scan
from stepscope.tracer.record_workload import record_workload
from test_checkpoints import _what_if_with_knobs_at
from test_fuzz_traces import run_cli
from test_next_conformance import HYBRID, SHARED_NEXT

EVERY = 2
"""Steps between checkpoints: a hybrid case is short, so every other step has one."""

CASES = [
    pytest.param(path, id=path.stem)
    for path in sorted(SHARED_NEXT.glob("*.json"))
    if path.name.startswith(HYBRID)
]


def _recorded(case: Path, folder: Path) -> Path:
    workload = load_workload(case)
    trace = folder / "trace.duckdb"
    record_workload(workload, TapeModelRunner.for_workload(workload), trace, checkpoint_every=EVERY)
    return trace


def test_the_corpus_is_every_hybrid_scenario() -> None:
    assert len(CASES) == len(HYBRID) == 9


@pytest.mark.parametrize("case", CASES)
def test_each_hybrid_checkpoint_is_reached_and_a_replay_from_it_is_exact(
    case: Path, tmp_path: Path
) -> None:
    """The state held equals the state a replay from step 0 reaches (every group's table,
    the pool), and `stepscope replay --from-step` from each checkpoint matches every step."""
    trace = _recorded(case, tmp_path)
    with open_trace(trace) as opened:
        steps, num_steps = checkpoint_steps(opened), opened.num_steps
        groups = recorded_config(opened).kv_cache_groups
        states = [read_checkpoint(opened, step) for step in steps]
    assert steps == list(range(EVERY, num_steps, EVERY))
    assert groups is not None and len(groups) > 1
    num_groups = len(groups)
    assert all(len(rc.group_block_ids) == num_groups - 1 for s in states for rc in s.requests)
    assert any(rc.group_block_ids and any(rc.group_block_ids) for s in states for rc in s.requests)
    assert assert_checkpoints_hold(trace) == len(steps)
    for step in steps:
        code, out, err = run_cli("replay", str(trace), "--from-step", str(step), "--json")
        assert code == 0, (step, out, err)
        assert f'"checkpoint_step": {step}' in out


def test_a_window_leaves_null_entries_in_the_checkpoint(tmp_path: Path) -> None:
    """A sliding window's freed blocks are null entries (0) in its table, and the replay from
    that checkpoint needs them there (a table without them is not the scheduler's)."""
    (case,) = [path for path in SHARED_NEXT.glob("71_*.json")]
    trace = _recorded(case, tmp_path)
    with open_trace(trace) as opened:
        states = [read_checkpoint(opened, step) for step in checkpoint_steps(opened)]
    tables = [
        table
        for state in states
        for rc in state.requests
        for table in (rc.block_ids, *rc.group_block_ids)
    ]
    assert any(0 in table and any(table) for table in tables)


def _damageable(tmp_path: Path) -> tuple[SchedulerCheckpoint, RequestCheckpoint, int, Path]:
    """A checkpoint of 74 (preemption under KV pressure) with a block a window group holds:
    the state, the request, the block, the trace."""
    (case,) = [path for path in SHARED_NEXT.glob("74_*.json")]
    trace = _recorded(case, tmp_path)
    with open_trace(trace) as opened:
        for step in checkpoint_steps(opened):
            state = read_checkpoint(opened, step)
            for rc in state.requests:
                held = [b for table in rc.group_block_ids for b in table if b]
                if held:
                    return state, rc, held[0], trace
    raise AssertionError("no checkpoint of 74 holds a window group's block")


def _check(state: SchedulerCheckpoint, trace: Path) -> None:
    with open_trace(trace) as opened:
        workload = workload_from_trace(opened, since=state)
    check_checkpoint(state, workload.config, {s.request_id: s for s in workload.requests})


def _one_line(error: pytest.ExceptionInfo[CheckpointError], *names: str) -> None:
    message = str(error.value)
    assert "\n" not in message
    for name in names:
        assert name in message, (name, message)


def test_an_untouched_hybrid_checkpoint_checks(tmp_path: Path) -> None:
    state, _, _, trace = _damageable(tmp_path)
    _check(state, trace)


def test_a_window_blocks_ref_cnt_off_by_one_is_one_line(tmp_path: Path) -> None:
    state, _, block_id, trace = _damageable(tmp_path)
    ref_cnts = list(state.block_pool.ref_cnts)
    ref_cnts[block_id] += 1
    pool = dataclasses.replace(state.block_pool, ref_cnts=tuple(ref_cnts))
    with pytest.raises(CheckpointError) as error:
        _check(dataclasses.replace(state, block_pool=pool), trace)
    _one_line(error, f"step {state.step}", f"block {block_id}: ref_cnt")


def test_a_window_block_also_in_the_free_queue_is_one_line(tmp_path: Path) -> None:
    state, _, block_id, trace = _damageable(tmp_path)
    free = (*state.block_pool.free_block_ids, block_id)
    pool = dataclasses.replace(state.block_pool, free_block_ids=free)
    with pytest.raises(CheckpointError) as error:
        _check(dataclasses.replace(state, block_pool=pool), trace)
    _one_line(error, f"step {state.step}", "free queue")


def test_a_checkpoint_of_fewer_groups_than_the_config_is_one_line(tmp_path: Path) -> None:
    state, rc, _, trace = _damageable(tmp_path)
    one_group = dataclasses.replace(rc, group_block_ids=(), group_num_cached_blocks=())
    requests = tuple(one_group if r is rc else r for r in state.requests)
    with pytest.raises(CheckpointError) as error:
        _check(dataclasses.replace(state, requests=requests), trace)
    _one_line(error, "kv_cache_groups", repr(rc.request_id))


def test_a_window_groups_num_cached_blocks_past_its_table_is_one_line(tmp_path: Path) -> None:
    state, rc, _, trace = _damageable(tmp_path)
    past = tuple(len(table) + 1 for table in rc.group_block_ids)
    requests = tuple(
        dataclasses.replace(r, group_num_cached_blocks=past) if r is rc else r
        for r in state.requests
    )
    with pytest.raises(CheckpointError) as error:
        _check(dataclasses.replace(state, requests=requests), trace)
    _one_line(error, "KV cache group 1", "num_cached_blocks")


def test_a_damaged_hybrid_checkpoint_in_the_trace_is_one_line_from_the_cli(
    tmp_path: Path,
) -> None:
    """Through the file: a window block's ref_cnt made one more in `_checkpoint_blocks`."""
    state, _, block_id, trace = _damageable(tmp_path)
    with duckdb.connect(str(trace)) as con:
        con.execute(
            "UPDATE _checkpoint_blocks SET ref_cnt = ref_cnt + 1 WHERE step = ? AND block_id = ?",
            [state.step, block_id],
        )
    code, out, err = run_cli("replay", str(trace), "--from-step", str(state.step))
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert f"block {block_id}: ref_cnt" in lines[0]


@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[-1]])
def test_a_hybrid_run_records_as_segments_each_of_which_replays_exactly(
    case: Path, tmp_path: Path
) -> None:
    path = case
    folder = tmp_path / "rec"
    code, out, err = run_cli("record", str(path), "-o", str(folder), "--segment", "3steps")
    assert code == 0, (out, err)
    segments = scan(folder)
    with open_trace(folder) as opened:
        num_steps = opened.num_steps
    assert [s.first_step for s in segments] == list(range(0, num_steps, 3))
    assert len(segments) > 2
    assert_checkpoints_hold(folder)  # every segment's opening checkpoint
    for segment in segments[1:]:
        first = str(segment.first_step)
        code, out, err = run_cli("replay", str(folder), "--from-step", first, "--json")
        assert code == 0, (first, out, err)
        assert f'"checkpoint_step": {first}' in out


def test_a_junction_hit_taken_in_chunks_replays_exactly_from_each_checkpoint(
    tmp_path: Path,
) -> None:
    """A request admitted on a prefix hit that full attention found longer than the window
    group could serve caches its window blocks at that junction as its prefill reaches it:
    a checkpoint taken before then must hold the junction (`shared_prefix_boundary`)."""
    (case,) = [path for path in SHARED_NEXT.glob("72_*.json")]
    raw = json.loads(case.read_text())
    raw["config"]["max_num_batched_tokens"] = 4  # the prefill in chunks of a block
    workload = parse_workload(json.dumps(raw), "72-in-chunks")
    trace = tmp_path / "trace.duckdb"
    record_workload(workload, TapeModelRunner.for_workload(workload), trace, checkpoint_every=1)
    with open_trace(trace) as opened:
        steps = checkpoint_steps(opened)
        states = [read_checkpoint(opened, step) for step in steps]
    assert any(
        0 < rc.num_computed_tokens < rc.shared_prefix_boundary
        for state in states
        for rc in state.requests
    )
    assert assert_checkpoints_hold(trace) == len(steps)
    for step in steps:
        result = replay_exact(trace, window=StepWindow(step))
        assert result.divergence is None, (step, result.divergence)


def test_a_schema_11_trace_reads_its_checkpoints_as_one_group(tmp_path: Path) -> None:
    """An older trace lacks the group columns: its one-group checkpoints restore as before."""
    (case,) = [path for path in SHARED_NEXT.glob("84_*.json")]
    trace = _recorded(case, tmp_path)
    with duckdb.connect(str(trace)) as con:
        for column in ("group_block_ids", "group_num_cached_blocks", "shared_prefix_boundary"):
            con.execute(f"ALTER TABLE _checkpoint_requests DROP COLUMN {column}")
        con.execute("UPDATE _meta SET value = '11' WHERE key = 'schema_version'")
    with open_trace(trace) as opened:
        assert opened.schema_version == 11
        steps = checkpoint_steps(opened)
        state = read_checkpoint(opened, steps[-1])
    assert state.requests and all(
        rc.group_block_ids == () and rc.shared_prefix_boundary == 0 for rc in state.requests
    )
    assert assert_checkpoints_hold(trace) == len(steps)
    code, out, err = run_cli("replay", str(trace), "--from-step", str(steps[-1]), "--json")
    assert code == 0 and json.loads(out)["identical"], (out, err)


@pytest.mark.parametrize("seed", range(12))
def test_random_hybrid_workloads_hold_their_checkpoints_and_replay_from_them(
    seed: int, tmp_path: Path
) -> None:
    """One to three groups of any kind, sync or async, aborts before the update: each
    checkpoint is the state reached, and a replay from the middle and the last is exact."""
    rng = random.Random(seed)
    raw = random_workload(rng, async_scheduling=seed % 2 == 1, late_aborts=seed % 3 == 0)
    workload = parse_workload(json.dumps(with_hybrid_groups(rng, raw)), f"hybrid-{seed}")
    trace = tmp_path / "trace.duckdb"
    record_workload(workload, TapeModelRunner.for_workload(workload), trace, checkpoint_every=3)
    with open_trace(trace) as opened:
        steps, num_steps = checkpoint_steps(opened), opened.num_steps
    assert assert_checkpoints_hold(trace) == len(steps)
    for step in sorted({steps[len(steps) // 2] + 1, steps[-1]} if steps else ()):
        if step < num_steps:
            result = replay_exact(trace, window=StepWindow(step))
            assert result.divergence is None, (step, result.divergence)


@pytest.mark.parametrize("case", [CASES[3], CASES[5]])
def test_a_hybrid_what_if_from_a_step_is_one_from_step_0_whose_knobs_take_effect_there(
    case: Path, tmp_path: Path
) -> None:
    """As `test_checkpoints.py`'s: the knob changed at the start of step S in a run from
    step 0 decides as the what-if restored from the checkpoint before S."""
    trace = _recorded(case, tmp_path)
    knobs = {"max_num_seqs": 1}
    from_step = 2 * EVERY + 1  # not a checkpoint: the run from the one before it is silent
    window = StepWindow(from_step)
    windowed = tmp_path / "from-step.duckdb"
    replay_whatif(trace, windowed, knobs, window=window)
    reference = tmp_path / "knobs-at-step.duckdb"
    _what_if_with_knobs_at(trace, reference, knobs, from_step)
    assert diff_traces(reference, windowed, window=window).identical
    assert diff_traces(trace, windowed, window=window).first_decision_step is not None
