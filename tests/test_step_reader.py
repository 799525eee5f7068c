"""`read_step`: one step of a real recorded trace in full, as the TUI and the diff show it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TESTS
from export_traces import idle_steps_workload
from stepscope.engine.workload import parse_workload
from stepscope.schema import StepDetail, open_trace, read_step
from test_feature_inputs import _as_schema_3
from traces import case, record


@pytest.fixture(scope="module")
def victims(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Case 05: A's running grant at step 2 is refused twice, C then B preempted for it."""
    path = tmp_path_factory.mktemp("step") / "victims.duckdb"
    record(case("05"), path)
    return path


def read(path: Path, step: int) -> StepDetail:
    with open_trace(path) as trace:
        return read_step(trace, step)


def test_a_preempting_step_reads_each_call_victim_and_event_in_order(victims: Path) -> None:
    detail = read(victims, 2)
    assert detail.in_trace and detail.row is not None
    assert detail.row["num_preemptions"] == 2 and detail.row["running_pass_end"] == "all_visited"
    assert detail.row["admission_stop"] == "preempted_this_step"
    calls = [
        (a["request_id"], a["pass"], a["num_free_blocks_before"], a["granted"], a["refusal"])
        for a in detail.allocations.dicts()
    ]
    assert calls == [
        ("A", "running", 0, False, "slots"),
        ("A", "running", 1, False, "slots"),
        ("A", "running", 2, True, None),
    ]
    assert [a["block_ids"] for a in detail.allocations.dicts()] == [[], [], [3, 4]]
    victims_in_order = [
        (p["request_id"], p["needed_by"], p["num_computed_tokens_discarded"], p["num_blocks_freed"])
        for p in detail.preemptions.dicts()
    ]
    assert victims_in_order == [("C", "A", 3, 1), ("B", "A", 3, 1)]
    assert next(detail.preemptions.dicts())["why"].startswith("A needed 2 block(s) for 7 token")
    assert detail.request_ids("preempt") == ["C", "B"]
    (scheduled,) = detail.scheduled.dicts()
    assert (scheduled["request_id"], scheduled["kind"], scheduled["new_block_ids"]) == (
        "A",
        "running",
        [3, 4],
    )
    assert (scheduled["computed_before"], scheduled["computed_after"]) == (16, 23)
    assert len(detail.drafts) == 0


def test_a_step_with_one_victim_reads_it(tmp_path: Path) -> None:
    """Case 24's step 5: C, refused, preempts itself."""
    path = tmp_path / "self.duckdb"
    record(case("24"), path)
    detail = read(path, 5)
    assert [(p["request_id"], p["needed_by"]) for p in detail.preemptions.dicts()] == [("C", "C")]
    assert [a["granted"] for a in detail.allocations.dicts()] == [True, True, False]


def test_an_admitting_step_reads_arrivals_admissions_and_waiting_grants(victims: Path) -> None:
    detail = read(victims, 0)
    assert detail.request_ids("arrive") == ["A", "B", "C"]
    assert detail.request_ids("admit") == ["A", "B", "C"]
    grants = [(a["request_id"], a["pass"], a["block_ids"]) for a in detail.allocations.dicts()]
    assert grants == [("A", "waiting", [1, 2]), ("B", "waiting", [3]), ("C", "waiting", [4])]
    assert [s["new_block_ids"] for s in detail.scheduled.dicts()] == [[1, 2], [3], [4]]
    assert len(detail.preemptions) == 0


def test_a_finishing_step_reads_the_refused_admission_and_the_blocked_head(victims: Path) -> None:
    detail = read(victims, 3)
    assert detail.row is not None and detail.row["blocked_request_id"] == "B"
    assert [(e["request_id"], e["kind"], e["detail"]) for e in detail.events.dicts()] == [
        ("A", "finish", "stop")
    ]
    refused = [a for a in detail.allocations.dicts() if not a["granted"]]
    assert [(a["request_id"], a["pass"], a["refusal"]) for a in refused] == [
        ("B", "waiting", "full_sequence")
    ]


def test_a_spec_decode_step_reads_each_requests_drafts_in_scheduled_order(tmp_path: Path) -> None:
    (workload,) = sorted((TESTS / "conformance_spec").glob("54_*.json"))
    path = tmp_path / "spec.duckdb"
    record(workload, path)
    detail = read(path, 1)
    drafts = [
        (d["request_id"], d["scheduled_draft_token_ids"], d["num_accepted"], d["sampled_token_ids"])
        for d in detail.drafts.dicts()
    ]
    assert drafts == [("A", [887, 222, 744], 0, [886]), ("B", [638, 740, 544], 1, [638, 739])]
    assert [d["request_id"] for d in detail.drafts.dicts()] == [
        s["request_id"] for s in detail.scheduled.dicts()
    ]
    first = read(path, 0)
    assert [d["proposed_draft_token_ids"] for d in first.drafts.dicts()] == [
        [887, 222, 744],
        [638, 740, 544],
    ]


def test_an_idle_step_reads_its_row_and_its_arrival(tmp_path: Path) -> None:
    """Steps 4 to 7 of the idle workload schedule nothing (their counts are NULL)."""
    path = tmp_path / "idle.duckdb"
    record(parse_workload(idle_steps_workload(), source="idle"), path)
    idle, arrival = read(path, 4), read(path, 8)
    assert idle.row is not None and idle.row["idle"] and idle.row["num_preemptions"] is None
    assert len(idle.scheduled) == len(idle.allocations) == len(idle.preemptions) == 0
    assert arrival.request_ids("arrive") == ["late"]


@pytest.mark.parametrize("step", [-1, 8, 10_000])
def test_a_step_the_trace_lacks_reads_with_no_row_and_no_rows(victims: Path, step: int) -> None:
    detail = read(victims, step)
    assert detail.step == step and not detail.in_trace and detail.row is None
    for rows in (detail.scheduled, detail.allocations, detail.preemptions, detail.events):
        assert len(rows) == 0


def test_an_older_schema_trace_reads_each_step_as_todays(victims: Path, tmp_path: Path) -> None:
    older = _as_schema_3(victims, tmp_path / "older.duckdb")
    with open_trace(victims) as today, open_trace(older) as then:
        assert then.schema_version == 3
        for step in range(today.num_steps):
            assert read_step(then, step) == read_step(today, step), step


def test_as_json_keys_each_row_by_column_name(victims: Path) -> None:
    data = read(victims, 2).as_json()
    assert data["step"] == 2 and data["row"]["num_preemptions"] == 2
    assert [p["request_id"] for p in data["preemptions"]] == ["C", "B"]
    assert data["allocations"][2]["block_ids"] == [3, 4] and data["drafts"] == []
