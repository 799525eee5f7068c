"""Exact replay's per-step comparison catches a change in every field it compares.

Each case changes one recorded fact at one step of a trace with preemptions, resumed
requests, prefill chunks and idle steps; the replay must diverge at that step and name
the field, and the comparison must accept every step of the unchanged trace, each step
fingerprinted (none skipped as stored alike).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from stepscope.replay.exact import EXACT_FIELDS, replay_exact
from stepscope.replay.step_differences import step_differences
from stepscope.replay.step_fingerprints import step_fingerprints
from traces import case, prefill_heavy_workload, record

import stepscope

DECODE_BLOCK_STEP = """
    SELECT step FROM (
        SELECT b.step, b.request_index,
            lag(b.request_index) OVER (PARTITION BY b.step ORDER BY s.seq) AS previous_owner
        FROM _block_ids b JOIN _scheduled s USING (step, request_index)
    )
    WHERE step > 20 AND step NOT IN (SELECT step FROM _scheduled WHERE kind <> 'running')
    GROUP BY step
    HAVING count(*) = count(DISTINCT request_index) AND count(*) > 1
        AND bool_and(previous_owner IS NULL OR previous_owner < request_index)
"""
"""A step past 20 that ran only running requests and gave several of them one new block
each, their rows in request order (as a decode step stores them)."""

CHANGES = {
    "order": (
        "UPDATE _scheduled SET seq = -seq WHERE step = {step}",
        "SELECT min(step) FROM _scheduled GROUP BY step HAVING count(*) > 1 ORDER BY 1 LIMIT 1",
        ("scheduled", "sampled"),  # the rows' tokens come in the other order too
    ),
    "kind": (
        "UPDATE _scheduled SET kind = 'resumed' WHERE step = {step} AND kind = 'running'",
        "SELECT min(step) FROM _scheduled WHERE kind = 'running' AND step > 20",
        ("scheduled",),
    ),
    "sampled": (
        "UPDATE _scheduled SET sampled_token_id = NULL "
        "WHERE step = {step} AND sampled_token_id IS NOT NULL",
        "SELECT min(step) FROM _scheduled WHERE sampled_token_id IS NOT NULL AND step > 20",
        ("sampled",),
    ),
    "block_ids": (
        "UPDATE _block_ids SET block_id = block_id + 100000 WHERE step = {step}",
        "SELECT min(step) FROM _block_ids WHERE step > 20",
        ("block_ids",),
    ),
    "block_owner": (
        "UPDATE _block_ids SET request_index = request_index + 1 WHERE step = {step}",
        "SELECT min(step) FROM _block_ids WHERE step > 20",
        ("block_ids",),
    ),
    "block_ids_decode": (
        "UPDATE _block_ids SET block_id = block_id + 100000 WHERE step = {step}",
        "SELECT min(step) FROM (" + DECODE_BLOCK_STEP + ")",
        ("block_ids",),
    ),
    "block_owner_decode": (
        "UPDATE _block_ids SET request_index = request_index + 1 WHERE step = {step}",
        "SELECT min(step) FROM (" + DECODE_BLOCK_STEP + ")",
        ("block_ids",),
    ),
    "preempted": (
        "DELETE FROM _preemptions WHERE step = {step}",
        "SELECT min(step) FROM _preemptions",
        ("preempted",),
    ),
    "update_step": (
        "UPDATE _steps SET update_step = update_step + 1 WHERE step = {step}",
        "SELECT min(step) FROM _steps WHERE NOT idle AND step > 20",
        ("update_step",),
    ),
}


@pytest.fixture(scope="module")
def stress_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace = tmp_path_factory.mktemp("stress") / "t.duckdb"
    record(case("30"), trace)
    return trace


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_changed_field_diverges_at_its_step_and_is_named(
    name: str, stress_trace: Path, tmp_path: Path
) -> None:
    change, find_step, fields = CHANGES[name]
    changed = tmp_path / "changed.duckdb"
    shutil.copy(stress_trace, changed)
    with duckdb.connect(str(changed)) as connection:
        step = connection.sql(find_step).fetchall()[0][0]
        assert step is not None
        connection.execute(change.format(step=step))
    divergence = replay_exact(changed).divergence
    assert divergence is not None
    assert (divergence.step, divergence.fields) == (step, fields)
    assert divergence.recorded.in_trace and divergence.replayed.in_trace


def test_a_step_recorded_idle_diverges_there(stress_trace: Path, tmp_path: Path) -> None:
    changed = tmp_path / "changed.duckdb"
    shutil.copy(stress_trace, changed)
    with duckdb.connect(str(changed)) as connection:
        connection.execute("UPDATE _steps SET idle = true WHERE step = 25")
    divergence = replay_exact(changed).divergence
    assert divergence is not None
    assert divergence.step == 25 and "idle" in divergence.fields


@pytest.mark.parametrize("source", ["stress", "prefill_heavy"])
def test_the_comparison_accepts_every_step_of_an_unchanged_trace(
    source: str, stress_trace: Path, tmp_path: Path
) -> None:
    trace = stress_trace
    if source == "prefill_heavy":
        trace = tmp_path / "t.duckdb"
        record(prefill_heavy_workload(), trace)
    replayed = tmp_path / "replayed.duckdb"
    result = replay_exact(trace, output=replayed)
    assert result.divergence is None
    assert result.num_compared_steps == result.num_recorded_steps > 0
    with stepscope.open(trace) as recorded, stepscope.open(replayed) as replay:
        sides = [step_fingerprints(opened) for opened in (recorded, replay)]
    assert sides[0]["decision"].to_pylist() != [0] * sides[0].num_rows  # every step hashed
    assert step_differences(*sides, EXACT_FIELDS).steps == []
