"""Exact and what-if replay: identical on every conformance case; a changed rule diverges."""

from __future__ import annotations

import dataclasses
import gc
import shutil
import tempfile
from pathlib import Path

import duckdb
import pytest
from conftest import REPO, TESTS
from stepscope.engine import RequestFinish, Scheduler, SchedulerOutput, StepRecord, load_workload
from stepscope.engine.step_plan import StepPlan
from stepscope.replay.diff import Classification, diff_traces
from stepscope.replay.exact import replay_exact
from stepscope.replay.inputs import workload_from_trace
from stepscope.replay.whatif import replay_whatif
from traces import case, decode_workload, prefill_heavy_workload, record

import stepscope

CASES = sorted((TESTS / "conformance").glob("*.json"))


class AdmitAfterPreemption(Scheduler):
    """Drops the anti-thrash rule: admits even in a step that preempted."""

    def _may_admit(self, plan: StepPlan) -> bool:
        return True


@pytest.mark.parametrize("workload", CASES, ids=[c.stem for c in CASES])
def test_exact_replay_of_every_conformance_case_is_identical(
    workload: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "t.duckdb"
    record(workload, trace)
    result = replay_exact(trace)
    assert result.divergence is None
    assert result.num_compared_steps == result.num_recorded_steps > 0


class _EndingsAlive:
    """A step sink: the requests finished so far, and the `RequestFinish` objects alive
    (every 10 steps: a walk of the collector's objects)."""

    def __init__(self) -> None:
        self.num_finished = 0
        self.alive: list[int] = []

    def on_step(self, record: StepRecord, scheduler: Scheduler) -> None:
        if record.engine_step is not None:
            outputs = record.engine_step.outputs
            self.num_finished += sum(output.finish_reason is not None for output in outputs)
        if record.step % 10 == 0:
            self.alive.append(sum(isinstance(o, RequestFinish) for o in gc.get_objects()))


def test_an_exact_replay_keeps_no_request_endings(tmp_path: Path) -> None:
    """The trace has every ending; a replay that kept them would hold one per request, its
    output tokens included, for the whole run (with the loop's default, 59 by the end here)."""
    trace = tmp_path / "t.duckdb"
    record(case("30"), trace)
    endings = _EndingsAlive()
    assert replay_exact(trace, sinks=[endings]).divergence is None
    assert endings.num_finished >= 20 and len(endings.alive) >= 10
    assert max(endings.alive) == 0


def test_inputs_come_back_out_of_the_trace(tmp_path: Path) -> None:
    original = load_workload(case("33"))  # aborts, arrival times, stop conditions
    trace = tmp_path / "t.duckdb"
    record(original, trace)
    with stepscope.open(trace) as opened:
        recovered = workload_from_trace(opened)
    assert recovered.config == original.config
    assert recovered.max_steps == original.max_steps
    for mine, theirs in zip(recovered.requests, original.requests, strict=True):
        fields = ("request_id", "arrival_step", "arrival_time", "prompt_token_ids", "priority",
                  "abort_step", "sampling_params")  # fmt: skip
        assert [getattr(mine, f) for f in fields] == [getattr(theirs, f) for f in fields]


def test_a_replay_written_to_a_file_diffs_identical(tmp_path: Path) -> None:
    trace, replayed = tmp_path / "t.duckdb", tmp_path / "r.duckdb"
    record(case("40"), trace)
    assert replay_exact(trace, output=replayed).divergence is None
    assert diff_traces(trace, replayed).classification is Classification.IDENTICAL


def test_a_divergent_replay_written_to_a_file_holds_the_whole_replay(tmp_path: Path) -> None:
    """The replay is recorded like any run: past its divergence, to its end, complete."""
    trace, changed, replayed = (tmp_path / name for name in ("t.duckdb", "c.duckdb", "r.duckdb"))
    record(case("30"), trace)
    shutil.copy(trace, changed)
    with duckdb.connect(str(changed)) as con:
        con.execute("UPDATE _scheduled SET num_tokens = num_tokens + 1 WHERE step = 5")
    result = replay_exact(changed, output=replayed)
    assert result.divergence is not None and result.divergence.step == 5
    with stepscope.open(replayed) as opened, stepscope.open(trace) as original:
        assert opened.complete and opened.num_steps == original.num_steps > 6
    assert diff_traces(trace, replayed).classification is Classification.IDENTICAL


def test_exact_replay_leaves_no_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its temporary replay trace lives in a temporary directory, removed after the check,
    even when the replay diverges."""
    trace, changed, scratch = tmp_path / "t.duckdb", tmp_path / "c.duckdb", tmp_path / "tmp"
    record(case("30"), trace)
    shutil.copy(trace, changed)
    with duckdb.connect(str(changed)) as con:
        con.execute("UPDATE _steps SET num_free_blocks_after_schedule = 0 WHERE step = 3")
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    assert replay_exact(trace).divergence is None
    assert replay_exact(changed).divergence is not None
    assert list(scratch.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.duckdb", "t.duckdb", "tmp"]


def test_a_changed_rule_diverges_where_it_first_matters(tmp_path: Path) -> None:
    # Scenario 06: M would fit at step 5, right after L's preemption; vLLM admits it at 6.
    trace = tmp_path / "t.duckdb"
    record(case("06"), trace)
    exact = replay_exact(trace, scheduler_cls=AdmitAfterPreemption)
    assert exact.divergence is not None and exact.divergence.step == 5
    assert exact.divergence.fields == ("num_free_blocks", "scheduled", "block_ids", "sampled")
    whatif = replay_whatif(trace, tmp_path / "w.duckdb", scheduler_cls=AdmitAfterPreemption)
    assert whatif.diff.first_decision_step == 5
    assert whatif.diff.classification is Classification.DECISION
    # Exact replay and the diff name what differs in the same words.
    assert whatif.diff.decision_fields == exact.divergence.fields[:-1]
    a, b = whatif.diff.first_step_detail or (None, None)
    assert a is not None and b is not None
    assert [row["request_id"] for row in a.scheduled.dicts()] == ["H"]
    assert [row["request_id"] for row in b.scheduled.dicts()] == ["H", "M"]


def test_a_changed_sampled_token_diverges_as_input(tmp_path: Path) -> None:
    original = load_workload(case("39"))
    # q04 now samples EOS as its second token: the model said something else.
    changed = dataclasses.replace(
        original,
        requests=tuple(
            dataclasses.replace(spec, output_token_ids=(spec.output_token_ids[0], 2))
            if spec.request_id == "q04"
            else spec
            for spec in original.requests
        ),
    )
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    record(original, a)
    record(changed, b)
    diff = diff_traces(a, b)
    assert diff.classification is Classification.INPUT
    assert diff.input_cause is not None and diff.input_cause.startswith("sampled tokens")
    assert diff.first_input_step is not None and diff.first_decision_step is not None
    assert diff.first_input_step <= diff.first_decision_step


def test_what_if_with_a_doubled_budget_drains_in_fewer_steps(tmp_path: Path) -> None:
    trace = tmp_path / "t.duckdb"
    record(prefill_heavy_workload(), trace)
    result = replay_whatif(trace, tmp_path / "w.duckdb", {"max_num_batched_tokens": 512})
    before, after = result.diff.metrics["steps_to_drain"]
    assert after < before
    assert result.diff.config_differences == {"max_num_batched_tokens": (256, 512)}
    assert result.num_placeholder_tokens == 0
    assert result.cost_model is not None
    usable = result.cost_model.problem is None  # the fit is to this machine's wall clock
    assert set(result.seconds) >= {"total_s", "mean_ttft_s"} if usable else result.seconds == {}


def test_exact_replay_of_an_incomplete_trace_compares_what_it_holds(tmp_path: Path) -> None:
    trace = tmp_path / "t.duckdb"

    class StopEarly:
        def on_step(self, record_: object, scheduler: object) -> None:
            if getattr(record_, "step", 0) == 30:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        record(decode_workload(8, 200), trace, sinks=[StopEarly()], flush_every_steps=4)
    result = replay_exact(trace)
    assert not result.trace_complete
    assert result.divergence is None
    assert result.num_compared_steps == result.num_recorded_steps == 31


def test_a_tampered_trace_is_caught(tmp_path: Path) -> None:
    trace = tmp_path / "t.duckdb"
    record(case("03"), trace)
    tampered = tmp_path / "tampered.duckdb"
    shutil.copy(trace, tampered)
    with duckdb.connect(str(tampered)) as con:
        con.execute("UPDATE _steps SET num_free_blocks_after_schedule = 5 WHERE step = 4")
    result = replay_exact(tampered)
    assert result.divergence is not None
    assert result.divergence.step == 4 and result.divergence.fields == ("num_free_blocks",)


def test_the_ci_example_scheduler_loads() -> None:
    from stepscope.inputs import load_scheduler_class

    cls = (
        load_scheduler_class("examples.ci.my_scheduler:AdmitAfterPreemption")
        if (REPO / "examples" / "ci" / "my_scheduler.py").exists()
        else None
    )
    assert cls is not None and issubclass(cls, Scheduler)


class CountingScheduler(Scheduler):
    """Overrides vLLM's `schedule()` itself, as a what-if scheduler written for vLLM would."""

    calls = 0

    def schedule(self) -> SchedulerOutput:
        type(self).calls += 1
        return super().schedule()


def test_a_scheduler_overriding_schedule_is_stepped_through_it(tmp_path: Path) -> None:
    trace = tmp_path / "t.duckdb"
    record(case("40"), trace)
    whatif = replay_whatif(trace, tmp_path / "w.duckdb", scheduler_cls=CountingScheduler)
    assert whatif.diff.identical
    with stepscope.open(whatif.output) as replayed:
        (num_scheduled,) = replayed.sql("SELECT count(*) FROM steps WHERE NOT idle").fetchall()[0]
    assert CountingScheduler.calls == num_scheduled > 0
