"""Exact replay's fast paths agree with the plain ones: tapes, packed step checks, decisions."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import TESTS
from stepscope.replay.exact import replay_exact
from stepscope.replay.inputs import recorded_outputs
from stepscope.replay.sql import query
from stepscope.replay.step_decision import RecordedDecisions
from traces import prefill_heavy_workload, record

import stepscope

CASES = sorted((TESTS / "conformance").glob("*.json"))[:12]


@pytest.mark.parametrize("workload", CASES, ids=[c.stem for c in CASES])
def test_tapes_read_as_flat_rows_equal_the_list_aggregate(workload: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.duckdb"
    record(workload, trace)
    with stepscope.open(trace) as opened:
        aggregated = {r: list(t) for r, t in opened.sql(query("recorded_outputs")).fetchall()}
        assert recorded_outputs(opened) == aggregated


def test_small_read_ranges_give_the_same_decisions(tmp_path: Path) -> None:
    trace = tmp_path / "t.duckdb"
    record(prefill_heavy_workload(), trace)  # prefill chunks sample nothing: NULL tokens
    with stepscope.open(trace) as opened:
        whole = list(RecordedDecisions(opened))
        ranged = list(RecordedDecisions(opened, batch_rows=7))
    assert whole == ranged
    assert any(None in decision.sampled_token_ids for decision in whole)


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
        assert recorded_outputs(opened) == stored


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
    divergence = replay_exact(changed).divergence
    assert divergence is not None
    assert (divergence.step, divergence.fields) == (step, fields)
    assert divergence.recorded is not None and divergence.replayed is not None
    assert divergence.replayed_decisions  # from the second run, which has a probe
