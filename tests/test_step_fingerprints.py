"""A step's fingerprints change when any field the diff compares changes, and only then.

Each case edits one field of one row of a recorded trace (a copy) and checks that the
edited step's fingerprint for that field, and no other fingerprint of any step, differs.
Storage order is not part of a decision: rows stored in another order fingerprint the same.
Steps two traces stored alike are not fingerprinted, and the comparison is the same.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from stepscope.replay import step_differences
from stepscope.replay.diff import compare_steps
from stepscope.replay.step_fingerprints import step_fingerprints
from stepscope.replay.stored_alike import ALL_STEPS, stored_alike, stored_rows
from stepscope.schema import open_trace
from traces import case, record

FINGERPRINTS = ("idle", "update_step", "num_free_blocks", "decision", "sampled", "blocks",
                "preempted", "inputs")  # fmt: skip

_FIRST_ROW = "(SELECT min(seq) FROM _scheduled WHERE step = 0)"
_FIRST_SAMPLED = "(SELECT min(seq) FROM _scheduled WHERE sampled_token_id IS NOT NULL)"
_FIRST_BLOCK = "(SELECT min(request_index) FROM _block_ids WHERE step = 0)"
_ITS_LAST_SLOT = (
    f"(SELECT max(slot) FROM _block_ids WHERE step = 0 AND request_index = {_FIRST_BLOCK})"
)
_FIRST_ARRIVAL = "(SELECT min(seq) FROM _events WHERE kind = 'arrive')"
_OTHER = "(SELECT max(request_index) FROM _requests)"
"""The request the fixture adds, which no recorded row names."""

EDITS = {
    "num_tokens": (f"UPDATE _scheduled SET num_tokens = num_tokens + 1 WHERE seq = {_FIRST_ROW}",
                   {"decision"}),
    "kind": (f"UPDATE _scheduled SET kind = 'resumed' WHERE seq = {_FIRST_ROW}", {"decision"}),
    "request": (f"UPDATE _scheduled SET request_index = {_OTHER} WHERE seq = {_FIRST_ROW}",
                {"decision", "sampled"}),
    "position": (f"UPDATE _scheduled SET seq = seq - 1 WHERE seq = {_FIRST_ROW}",
                 {"decision", "sampled"}),
    "sampled_token": ("UPDATE _scheduled SET sampled_token_id = sampled_token_id + 1 "
                      f"WHERE seq = {_FIRST_SAMPLED}", {"sampled"}),
    "sampled_none": (f"UPDATE _scheduled SET sampled_token_id = NULL WHERE seq = {_FIRST_SAMPLED}",
                     {"sampled"}),
    "idle": ("UPDATE _steps SET idle = NOT idle WHERE step = 0", {"idle"}),
    "update_step": ("UPDATE _steps SET update_step = update_step + 1 WHERE step = 0",
                    {"update_step"}),
    "free_blocks": ("UPDATE _steps SET num_free_blocks_after_schedule = "
                    "num_free_blocks_after_schedule - 1 WHERE step = 0", {"num_free_blocks"}),
    "block_id": ("UPDATE _block_ids SET block_id = block_id + 1 "
                 f"WHERE step = 0 AND request_index = {_FIRST_BLOCK} AND slot = {_ITS_LAST_SLOT}",
                 {"blocks"}),
    "block_request": (f"UPDATE _block_ids SET request_index = {_OTHER} "
                      f"WHERE step = 0 AND request_index = {_FIRST_BLOCK}", {"blocks"}),
    "victim": (f"UPDATE _preemptions SET request_index = {_OTHER} "
               "WHERE seq = (SELECT min(seq) FROM _preemptions)", {"preempted"}),
    "arrival_kind": ("UPDATE _events SET kind = 'reject' "
                     f"WHERE seq = {_FIRST_ARRIVAL}", {"inputs"}),
    "abort_detail": ("UPDATE _events SET detail = 'other' "
                     f"WHERE seq = {_FIRST_ARRIVAL}", {"inputs"}),
}  # fmt: skip
"""Each edit, and the fingerprints it must change (at the edited row's step only)."""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Case 05: several requests a step, preemptions, block tables, sampled tokens."""
    path = tmp_path_factory.mktemp("fingerprints") / "recorded.duckdb"
    record(case("05"), path)
    with duckdb.connect(str(path)) as con:
        # Request `_OTHER` (the last, a copy of request 0 under another id) stands for a
        # request the trace names but the edited row did not.
        con.execute(
            "INSERT INTO _requests SELECT * REPLACE (request_index + "
            "(SELECT count(*) FROM _requests) AS request_index, 'other' AS request_id) "
            "FROM _requests WHERE request_index = 0"
        )
    return path


def _edited(recorded: Path, path: Path, *statements: str) -> Path:
    shutil.copy(recorded, path)
    with duckdb.connect(str(path)) as con:
        for statement in statements:
            con.execute(statement)
    return path


def _fingerprints(path: Path) -> dict[str, list[int]]:
    with open_trace(path) as trace:
        return step_fingerprints(trace).to_pydict()


def _changed(a: dict[str, list[int]], b: dict[str, list[int]]) -> dict[str, list[int]]:
    """Per fingerprint, the steps where it differs."""
    assert a["step"] == b["step"]
    changed = {}
    for name in FINGERPRINTS:
        steps = [s for s, x, y in zip(a["step"], a[name], b[name], strict=True) if x != y]
        if steps:
            changed[name] = steps
    return changed


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_field_changes_its_fingerprint_only(
    edit: str, recorded: Path, tmp_path: Path
) -> None:
    statement, fields = EDITS[edit]
    with duckdb.connect(str(recorded), read_only=True) as con:
        before = con.sql("SELECT * FROM _scheduled ORDER BY seq").fetchall()
    edited = _edited(recorded, tmp_path / "edited.duckdb", statement)
    with duckdb.connect(str(edited), read_only=True) as con:
        assert con.sql("SELECT * FROM _scheduled ORDER BY seq").fetchall() != before or (
            "_scheduled" not in statement
        )
    changed = _changed(_fingerprints(recorded), _fingerprints(edited))
    assert set(changed) == fields
    assert all(len(steps) == 1 for steps in changed.values())


def test_swapping_tokens_between_two_rows_of_a_step_is_found(
    recorded: Path, tmp_path: Path
) -> None:
    """Each row's fields are mixed together before the rows are combined: the same
    multiset of token counts over the same requests, paired differently, differs."""
    with duckdb.connect(str(recorded), read_only=True) as con:
        (step, a, b) = con.sql(
            "SELECT x.step, x.seq, y.seq FROM _scheduled x JOIN _scheduled y "
            "ON x.step = y.step AND x.seq < y.seq AND x.num_tokens <> y.num_tokens "
            "ORDER BY x.step, x.seq, y.seq LIMIT 1"
        ).fetchall()[0]
    swap = (
        f"UPDATE _scheduled SET num_tokens = (SELECT sum(num_tokens) FROM _scheduled "
        f"WHERE seq IN ({a}, {b})) - num_tokens WHERE seq IN ({a}, {b})"
    )
    edited = _edited(recorded, tmp_path / "swapped.duckdb", swap)
    assert _changed(_fingerprints(recorded), _fingerprints(edited)) == {"decision": [step]}


def test_rows_stored_in_another_order_fingerprint_the_same(recorded: Path, tmp_path: Path) -> None:
    reordered = _edited(
        recorded,
        tmp_path / "reordered.duckdb",
        *(
            statement
            for table, key in (("_scheduled", "seq"), ("_steps", "step"), ("_block_ids", "slot"))
            for statement in (
                f"CREATE TABLE t AS SELECT * FROM {table} ORDER BY {key} DESC",
                f"DELETE FROM {table}",
                f"INSERT INTO {table} SELECT * FROM t",
                "DROP TABLE t",
            )
        ),
    )
    with duckdb.connect(str(reordered), read_only=True) as con:
        steps = [row[0] for row in con.sql("SELECT step FROM _scheduled").fetchall()]
    assert steps != sorted(steps)  # the unsorted path runs
    assert _fingerprints(reordered) == _fingerprints(recorded)


_LATER_EDITS = {
    "later_tokens": "UPDATE _scheduled SET num_tokens = num_tokens + 1 WHERE seq = "
    "(SELECT max(seq) FROM _scheduled)",
    "later_free_blocks": "UPDATE _steps SET num_free_blocks_after_schedule = 0 WHERE step = 6",
    "later_victim": f"UPDATE _preemptions SET request_index = {_OTHER} WHERE step = 2",
    "later_block": "UPDATE _block_ids SET block_id = block_id + 1 WHERE step = "
    "(SELECT max(step) FROM _block_ids)",
    "one_step_fewer": "DELETE FROM _steps WHERE step = (SELECT max(step) FROM _steps)",
}
"""Edits past the first steps, so the two traces are stored alike up to some step."""


@pytest.mark.parametrize("edit", sorted(_LATER_EDITS) + sorted(EDITS))
def test_steps_stored_alike_are_skipped_without_changing_the_comparison(
    edit: str, recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    statement = _LATER_EDITS[edit] if edit in _LATER_EDITS else EDITS[edit][0]
    edited = _edited(recorded, tmp_path / "edited.duckdb", statement)
    with open_trace(recorded) as a, open_trace(edited) as b:
        start = stored_alike(stored_rows(a), stored_rows(b))
        skipping = compare_steps(a, b)
        monkeypatch.setattr(step_differences, "stored_alike", lambda *_: 0)
        whole = compare_steps(a, b)
    assert skipping == whole
    assert skipping.divergent_steps or skipping.first_input_step is not None
    assert start <= min([*skipping.divergent_steps, skipping.first_input_step or ALL_STEPS])
    if edit in _LATER_EDITS:
        assert start > 0


def test_a_copy_is_stored_alike_throughout(recorded: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.duckdb"
    shutil.copy(recorded, copy)
    with open_trace(recorded) as a, open_trace(copy) as b:
        assert stored_alike(stored_rows(a), stored_rows(b)) == ALL_STEPS
        assert compare_steps(a, b).identical
