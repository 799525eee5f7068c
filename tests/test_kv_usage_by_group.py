"""The blocks each KV cache group holds after `schedule()`: counted by the engine and by the
vLLM recorder alike, equal to real vLLM's block tables, recorded in `_steps` and read
through the `kv_usage_by_group` view (one group, hybrid groups, a schema 10 trace)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest
from conftest import TESTS, read_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_workloads import random_workload, with_hybrid_groups
from stepscope.engine import EngineLoop, TapeModelRunner, Workload, load_workload
from stepscope.engine.kv_cache_coordinator import KVCacheCoordinator
from stepscope.engine.scheduler_output import SchedulerOutput
from stepscope.engine.workload import parse_workload
from stepscope.replay.exact import replay_exact
from stepscope.schema import open_trace
from stepscope.tracer.vllm.attach.held_blocks import held_blocks_counter, num_held_blocks
from stepscope.tui.app import StepscopeApp
from test_next_conformance import CASES, HYBRID, SHARED_NEXT
from textual.pilot import Pilot
from textual.widgets import Static
from traces import record
from tui_support import drive, loaded

ORACLE = SHARED_NEXT.parent / "oracle" / "vllm_oracle.py"
HYBRID_CASES = [case for case in CASES if case.values[0].name.startswith(HYBRID)]
PRESSURE = SHARED_NEXT / "74_hybrid_sw_kv_pressure_preempt.json"
PLAIN = TESTS / "conformance" / "39_heavy_kv_pressure_fcfs.json"


class _CountingRunner(TapeModelRunner):
    """The tape runner that also counts each group's blocks the moment a step is scheduled:
    by block id, straight from the coordinator's managers (the engine's own count aside),
    and as the vLLM recorder counts vLLM's managers."""

    coordinator: KVCacheCoordinator
    direct: dict[int, tuple[int, ...]]
    """By the id of a SchedulerOutput still alive (ids are reused once one is gone)."""
    in_schedule_order: list[list[int]]
    as_vllm: dict[int, tuple[int, ...] | None]

    def execute_model(self, scheduler_output: SchedulerOutput) -> Any:
        managers = self.coordinator.managers
        direct = tuple(
            len({b.block_id for blocks in m.req_to_blocks.values() for b in blocks} - {0})
            for m in managers
        )
        self.direct[id(scheduler_output)] = direct
        self.in_schedule_order.append(list(direct))
        count = held_blocks_counter(_as_vllm_scheduler(self.coordinator))
        self.as_vllm[id(scheduler_output)] = None if count is None else count()
        return super().execute_model(scheduler_output)


def _as_vllm_scheduler(coordinator: KVCacheCoordinator) -> Any:
    """The engine's managers in vLLM's shape (`kv_cache_manager.coordinator`, `is_null`)."""
    managers = [
        SimpleNamespace(
            req_to_blocks={
                req_id: [SimpleNamespace(block_id=b.block_id, is_null=b.block_id == 0) for b in bs]
                for req_id, bs in m.req_to_blocks.items()
            }
        )
        for m in coordinator.managers
    ]
    coordinator_shape = SimpleNamespace(single_type_managers=managers)
    return SimpleNamespace(kv_cache_manager=SimpleNamespace(coordinator=coordinator_shape))


def _counted_run(workload: Workload) -> tuple[EngineLoop, _CountingRunner]:
    runner = _CountingRunner.for_workload(workload)
    assert isinstance(runner, _CountingRunner)
    runner.direct, runner.as_vllm, runner.in_schedule_order = {}, {}, []
    loop = EngineLoop(workload, runner)
    coordinator = loop.core.scheduler.kv_cache_manager
    assert isinstance(coordinator, KVCacheCoordinator)
    runner.coordinator = coordinator
    return loop, runner


@pytest.mark.parametrize(("workload", "expected"), HYBRID_CASES)
def test_each_step_s_counts_are_the_managers_and_add_up_to_the_pool(
    workload: Path, expected: Path
) -> None:
    loaded_workload = load_workload(workload)
    loop, runner = _counted_run(loaded_workload)
    num_usable_blocks = loaded_workload.config.num_blocks - 1
    num_steps = 0
    for step_record in loop.run():
        engine_step = step_record.engine_step
        if engine_step is None:
            continue
        counts = engine_step.num_held_blocks_by_group
        key = id(engine_step.scheduler_output)
        assert counts is not None and counts == runner.direct[key] == runner.as_vllm[key]
        assert sum(counts) == num_usable_blocks - engine_step.num_free_blocks_after_schedule
        num_steps += 1
    assert num_steps > 0


@pytest.mark.parametrize(("workload", "expected"), HYBRID_CASES)
def test_the_counts_are_real_vllm_s_block_tables(workload: Path, expected: Path) -> None:
    """vLLM's `block_tables` are read after the update: a step whose update freed nothing
    holds then what it held right after `schedule()`."""
    loaded_workload = load_workload(workload)
    if loaded_workload.config.async_scheduling:
        pytest.skip("a line is one step_with_batch_queue call, its tables after another update")
    loop, _ = _counted_run(loaded_workload)
    ours = {r.step: r.engine_step for r in loop.run() if r.engine_step is not None}
    compared = 0
    for line in read_jsonl(expected):
        engine_step = ours.get(line.get("step", -1))
        if engine_step is None or line["finished_this_step"]:
            continue
        tables = line["block_tables"].values()
        held = tuple(
            len({block_id for table in tables for block_id in table[group]} - {0})
            for group in range(len(loaded_workload.config.kv_cache_groups or ()))
        )
        assert engine_step.num_held_blocks_by_group == held, f"step {line['step']}"
        compared += 1
    assert compared > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_the_counts_hold_on_random_hybrid_workloads(rng: random.Random) -> None:
    raw = random_workload(rng, async_scheduling=rng.random() < 0.5, late_aborts=True)
    workload = parse_workload(json.dumps(with_hybrid_groups(rng, raw)), source="<random>")
    loop, runner = _counted_run(workload)
    for step_record in loop.run():
        engine_step = step_record.engine_step
        if engine_step is not None:
            counts = engine_step.num_held_blocks_by_group
            assert counts == runner.direct[id(engine_step.scheduler_output)]
            assert sum(counts) == workload.config.num_blocks - 1 - (
                engine_step.num_free_blocks_after_schedule
            )


@pytest.mark.slow
def test_the_vllm_recorder_counts_vllm_s_scheduler_as_the_engine_counts(
    vllm: Any, tmp_path: Path
) -> None:
    """vLLM 0.33.0's own scheduler on each hybrid scenario, counted after every `schedule()`
    by the recorder's `held_blocks_counter`: the engine's counts, call for call."""
    if not ORACLE.exists():
        pytest.skip("no ../shared/oracle script here")
    workloads = [str(case.values[0]) for case in HYBRID_CASES]
    out = tmp_path / "held.json"
    vllm.run([str(TESTS / "vllm_held_blocks.py"), str(ORACLE), str(out), *workloads])
    counted = json.loads(out.read_text())
    for path in workloads:
        loop, runner = _counted_run(load_workload(Path(path)))
        for _ in loop.run():
            pass
        assert counted[path] == runner.in_schedule_order, Path(path).name


def test_one_group_counts_nothing(tmp_path: Path) -> None:
    workload = load_workload(PLAIN)
    loop = EngineLoop(workload, TapeModelRunner.for_workload(workload))
    assert loop.core.scheduler.get_num_held_blocks_by_group is None
    assert all(
        r.engine_step.num_held_blocks_by_group is None
        for r in loop.run()
        if r.engine_step is not None
    )


def test_a_shared_block_counts_once_and_a_null_entry_not_at_all() -> None:
    null, shared, own = (SimpleNamespace(block_id=i, is_null=i == 0) for i in (0, 7, 8))
    assert num_held_blocks({"A": [null, shared, own], "B": [shared], "C": []}) == 2
    one_group = SimpleNamespace(single_type_managers=[SimpleNamespace(req_to_blocks={})])
    scheduler = SimpleNamespace(kv_cache_manager=SimpleNamespace(coordinator=one_group))
    assert held_blocks_counter(scheduler) is None


# ----- the trace and its view ---------------------------------------------------------


@pytest.fixture
def hybrid(tmp_path: Path) -> Path:
    return record(load_workload(PRESSURE), tmp_path / "hybrid.duckdb").path


def test_the_view_has_a_row_per_scheduled_step_and_group(hybrid: Path) -> None:
    with open_trace(hybrid) as trace:
        rows = trace.sql(
            "SELECT g.step, list(g.attention_type::VARCHAR ORDER BY g.kv_cache_group), "
            "list(g.num_held_blocks ORDER BY g.kv_cache_group), "
            "any_value(k.num_used_blocks), sum(g.usage), any_value(k.usage) "
            "FROM kv_usage_by_group g JOIN kv_usage k USING (step) GROUP BY g.step ORDER BY 1"
        ).fetchall()
        ((num_steps,),) = trace.sql("SELECT count(*) FROM _steps WHERE NOT idle").fetchall()
        stored = trace.sql(
            "SELECT step, num_held_blocks_by_group FROM _steps WHERE NOT idle ORDER BY step"
        ).fetchall()
    assert len(rows) == num_steps > 0
    for (step, types, held, used, usage, pool_usage), (_, recorded) in zip(
        rows, stored, strict=True
    ):
        assert types == ["full", "sliding_window"]
        assert held == recorded and sum(held) == used, f"step {step}"
        assert usage == pytest.approx(pool_usage, abs=1e-3)
    assert any(full > window for _, _, (full, window), *_ in rows)


def test_the_step_detail_shows_each_group_s_held_blocks(hybrid: Path) -> None:
    with open_trace(hybrid) as trace:
        ((held,),) = trace.sql(
            "SELECT num_held_blocks_by_group FROM _steps WHERE step = 0"
        ).fetchall()
    expected = f"KV blocks per group g0 {held[0]} · g1 {held[1]}"

    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        summary = str(pilot.app.screen.query_one("#detail-a .detail-summary", Static).render())
        assert expected in summary, summary

    drive(StepscopeApp(hybrid), scenario)


def test_a_plain_trace_reads_its_one_group_from_the_pool(tmp_path: Path) -> None:
    trace_path = record(load_workload(PLAIN), tmp_path / "plain.duckdb").path
    with open_trace(trace_path) as trace:
        assert trace.sql(
            "SELECT count(*) FROM _steps WHERE num_held_blocks_by_group IS NOT NULL"
        ).fetchall() == [(0,)]
        rows = trace.sql(
            "SELECT g.kv_cache_group, g.attention_type::VARCHAR, g.num_held_blocks, "
            "k.num_used_blocks, g.usage, k.usage FROM kv_usage_by_group g "
            "JOIN kv_usage k USING (step) ORDER BY step"
        ).fetchall()
        ((num_steps,),) = trace.sql("SELECT count(*) FROM _steps WHERE NOT idle").fetchall()
    assert len(rows) == num_steps > 0
    assert all(r[:2] == (0, "full") and r[2] == r[3] and r[4] == r[5] for r in rows)


def _as_schema_10(trace: Path, out: Path) -> Path:
    """The trace as schema version 10 wrote it: no held blocks per group."""
    shutil.copy(trace, out)
    with duckdb.connect(str(out)) as con:
        con.execute("ALTER TABLE _steps DROP COLUMN num_held_blocks_by_group")
        con.execute("UPDATE _meta SET value = '10' WHERE key = 'schema_version'")
    return out


def test_a_schema_10_hybrid_trace_reads_null_held_blocks(hybrid: Path, tmp_path: Path) -> None:
    older = _as_schema_10(hybrid, tmp_path / "10.duckdb")
    with open_trace(older) as trace:
        assert trace.sql(
            "SELECT count(*) FROM _steps WHERE num_held_blocks_by_group IS NOT NULL"
        ).fetchall() == [(0,)]
        rows = trace.sql("SELECT DISTINCT kv_cache_group, num_held_blocks FROM kv_usage_by_group")
        assert sorted(rows.fetchall()) == [(0, None), (1, None)]
        for info in trace.views():
            trace.view(info.name).fetchall()
    assert replay_exact(older).divergence is None
