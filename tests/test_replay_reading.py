"""Exact replay's fast paths agree with the plain ones: tapes and packed step checks."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import duckdb
import pytest
from conftest import TESTS
from rich.console import Console
from stepscope.engine import Workload
from stepscope.engine.workload import parse_workload
from stepscope.replay.exact import replay_exact
from stepscope.replay.exact_report import exact_to_json, print_exact
from stepscope.replay.inputs import recorded_outputs, workload_from_trace
from stepscope.replay.sql import query
from stepscope.replay.stored_alike import ALL_STEPS
from stepscope.tracer.redact import Redactor
from traces import prefill_heavy_workload, record

import stepscope

CASES = sorted((TESTS / "conformance").glob("*.json"))[:12]


@pytest.mark.parametrize("workload", CASES, ids=[c.stem for c in CASES])
def test_tapes_read_as_flat_rows_equal_the_list_aggregate(workload: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.duckdb"
    record(workload, trace)
    with stepscope.open(trace) as opened:
        rows = opened.sql(query("recorded_outputs"), [0, ALL_STEPS]).fetchall()
        aggregated = {request_id: list(tokens) for request_id, tokens in rows}
        assert _as_lists(recorded_outputs(opened)) == aggregated


def test_tapes_read_in_any_stored_order(tmp_path: Path) -> None:
    """Rows stored out of step order (a trace written by another tool) give the same tapes."""
    trace = tmp_path / "t.duckdb"
    record(prefill_heavy_workload(), trace)
    with stepscope.open(trace) as opened:
        stored = recorded_outputs(opened)
    shuffled = tmp_path / "shuffled.duckdb"
    shutil.copy(trace, shuffled)
    with duckdb.connect(str(shuffled)) as con:
        con.execute("CREATE TABLE _rows AS SELECT * FROM _scheduled ORDER BY hash(step, seq)")
        con.execute("DELETE FROM _scheduled")
        con.execute("INSERT INTO _scheduled SELECT * FROM _rows")
        con.execute("DROP TABLE _rows")
    with stepscope.open(shuffled) as opened:
        steps = opened.sql("SELECT step FROM _scheduled").fetchall()
        assert steps != sorted(steps)
        assert _as_lists(recorded_outputs(opened)) == _as_lists(stored)


@pytest.mark.parametrize(
    ("tape", "redacted"),
    [
        ([300, 301, 300, 301, 300], False),  # ids looked up in a table
        ([300, 2**31, 300, 2**63 - 1, 2**31], False),  # ids past the table: sorted
        ([300, 301, 300, 301, 300], True),  # 63-bit pseudonyms
    ],
)
def test_equal_token_ids_are_one_int_in_a_replays_inputs(
    tape: list[int], *, redacted: bool, tmp_path: Path
) -> None:
    """A replay holds every prompt and tape: each id is one Python int, shared by every
    token that has it (a workload may give any id up to 2**63 - 1), the values kept."""
    trace = tmp_path / "t.duckdb"
    record(_decode_with_tape(tape), trace, redactor=Redactor(b"k" * 32) if redacted else None)
    with stepscope.open(trace) as opened:
        specs = workload_from_trace(opened).requests
    prompts = [token for spec in specs for token in spec.prompt_token_ids]
    tapes = [token for spec in specs for token in spec.output_token_ids]
    for tokens in (prompts, tapes):
        assert len({id(token) for token in tokens}) == len(set(tokens)) < len(tokens)
    if not redacted:
        assert [list(spec.output_token_ids) for spec in specs] == [tape, tape]
        assert [list(spec.prompt_token_ids) for spec in specs] == [_PROMPT, _PROMPT]
    assert replay_exact(trace).divergence is None


_PROMPT = [4000 + t % 5 for t in range(17)]


def _decode_with_tape(tape: list[int]) -> Workload:
    """Two requests with `_PROMPT` decoding `tape` to its end (no EOS)."""
    request = {"prompt_token_ids": _PROMPT, "max_tokens": len(tape)}
    requests = [{"id": name, "output_token_ids": tape, **request} for name in ("a", "b")]
    config = {"block_size": 16, "num_blocks": 64, "max_num_batched_tokens": 64, "max_num_seqs": 4}
    return parse_workload(json.dumps({"config": config, "requests": requests}), source="tape")


def _as_lists(tapes: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
    return {request_id: list(tape) for request_id, tape in tapes.items()}


@pytest.mark.parametrize(
    ("change", "fields"),
    [
        ("UPDATE _scheduled SET num_tokens = num_tokens + 1 WHERE step = {step}", ("scheduled",)),
        (
            "UPDATE _steps SET num_free_blocks_after_schedule = 0 WHERE step = {step}",
            ("num_free_blocks",),
        ),
    ],
)
def test_a_changed_step_diverges_there_with_the_replays_decisions(
    change: str, fields: tuple[str, ...], tmp_path: Path
) -> None:
    trace, changed = tmp_path / "t.duckdb", tmp_path / "changed.duckdb"
    record(prefill_heavy_workload(), trace)
    shutil.copy(trace, changed)
    step = 12
    with duckdb.connect(str(changed)) as connection:
        connection.execute(change.format(step=step))
    replayed = tmp_path / "replayed.duckdb"
    divergence = replay_exact(changed, output=replayed).divergence
    assert divergence is not None
    assert (divergence.step, divergence.fields) == (step, fields)
    assert divergence.recorded.in_trace and divergence.replayed.in_trace
    # The replay's side is its own trace's rows at that step, allocation calls included.
    with stepscope.open(replayed) as opened:
        scheduled = opened.sql(_SCHEDULED_AT, params=[step]).fetchall()
        (num_calls,) = opened.sql(_CALLS_AT, params=[step]).fetchall()[0]
    replayed_rows = divergence.replayed.scheduled.dicts()
    assert [(row["request_id"], row["num_tokens"]) for row in replayed_rows] == scheduled
    assert divergence.recorded != divergence.replayed
    assert num_calls and len(divergence.replayed.allocations) == num_calls


def test_a_step_the_recording_lacks_is_the_replays_alone(tmp_path: Path) -> None:
    """The recording's last step cut away: the replay's step there is an `extra_step`, shown
    beside "(no such step)", and null in the JSON."""
    trace, changed = tmp_path / "t.duckdb", tmp_path / "changed.duckdb"
    record(prefill_heavy_workload(), trace)
    shutil.copy(trace, changed)
    with duckdb.connect(str(changed)) as connection:
        ((last,),) = connection.sql("SELECT max(step) FROM _steps").fetchall()
        for table in ("_steps", "_scheduled", "_block_ids", "_allocations", "_preemptions",
                      "_events", "_spec_decode"):  # fmt: skip
            connection.execute(f"DELETE FROM {table} WHERE step = ?", [last])
    result = replay_exact(changed)
    divergence = result.divergence
    assert divergence is not None
    assert (divergence.step, divergence.fields) == (last, ("extra_step",))
    assert not divergence.recorded.in_trace and divergence.replayed.in_trace
    sides = exact_to_json(result)["divergence"]
    assert sides["recorded"] is None and sides["replayed"]["step"] == last
    console = Console(record=True, width=160)
    print_exact(console, result)
    assert "(no such step)" in console.export_text()


_SCHEDULED_AT = "SELECT request_id, num_tokens FROM scheduled WHERE step = ? ORDER BY position"
_CALLS_AT = "SELECT count(*) FROM allocations WHERE step = ?"
