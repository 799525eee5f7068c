"""The doctor's queries that make `why_waiting`'s rows from the waits themselves (each request's
wait, the requests behind a blocked head, the requests held at the LoRA gate) answer as the
same questions asked of `why_waiting`, in the same order and types, over every kind of wait
and over windows that cut waits: the view stays the one definition of why a request waited.

The traces: a LoRA and grammar workload under KV pressure (every reason), that trace with
every step's stop rewritten and idle steps among the waits (`every_kind_of_step`), the
head-of-line example, and one workload of each kind the project records.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO
from stepscope.replay.sql import query
from stepscope.schema import open_trace
from test_view_restatements import ONE_OF_EACH_KIND, _label
from test_why_waiting_totals import every_kind_of_step, pressured
from traces import record

__all__ = ["pressured"]

BY_VIEW = {
    "doctor_waiting": """
        WITH waits AS (
            SELECT w.request_id, w.reason, count(*)::INTEGER AS num_steps,
                   min(w.step) AS first_step, max(w.step) AS last_step
            FROM why_waiting w
            JOIN _requests r ON r.request_id = w.request_id
            WHERE r.arrival_step BETWEEN $from_step AND $to_step AND w.step <= $to_step
            GROUP BY w.request_id, w.reason
        )
        SELECT r.request_id, sum(w.num_steps)::INTEGER AS num_waiting_steps,
               first(w.reason ORDER BY w.num_steps DESC, w.reason) AS main_reason,
               min(w.first_step) AS first_step, max(w.last_step) AS last_step,
               (SELECT count(*) FROM _requests
                WHERE arrival_step BETWEEN $from_step AND $to_step)::INTEGER AS num_requests
        FROM _requests r
        JOIN waits w ON w.request_id = r.request_id
        GROUP BY r.request_id, r.request_index
        ORDER BY num_waiting_steps DESC, r.request_index
    """,
    "doctor_head_of_line": """
        WITH refused AS (
            SELECT a.step, a.request_index, a.num_blocks_needed, a.watermark_blocks,
                   a.num_free_blocks_before
            FROM _steps s
            JOIN _allocations a
                ON a.step = s.step AND a.request_index = s.blocked_request_index
               AND a.pass = 'waiting' AND NOT a.granted
            WHERE s.admission_stop IN ('kv_full', 'kv_full_sequence')
              AND s.step BETWEEN $from_step AND $to_step
            QUALIFY row_number() OVER (PARTITION BY a.step ORDER BY a.seq DESC) = 1
        ),
        would_fit AS (
            SELECT f.step, f.request_index AS head_index, f.num_blocks_needed,
                   f.num_free_blocks_before, behind.request_index AS behind_index,
                   behind.request_id AS behind_id
            FROM refused f
            JOIN why_waiting w ON w.step = f.step AND w.reason = 'behind_blocked_head'
            JOIN _requests behind ON behind.request_id = w.request_id
            CROSS JOIN _config c
            WHERE ceil(behind.prompt_len / c.block_size) + f.watermark_blocks
                  <= f.num_free_blocks_before
        )
        SELECT h.request_id AS head, count(DISTINCT w.step)::INTEGER AS num_steps,
               min(w.step) AS first_step, max(w.step) AS last_step,
               max(w.num_blocks_needed) AS head_blocks_needed,
               max(w.num_free_blocks_before) AS max_free_blocks,
               count(DISTINCT w.behind_index)::INTEGER AS num_behind,
               list(DISTINCT w.behind_id ORDER BY w.behind_id) AS behind
        FROM would_fit w
        JOIN _requests h ON h.request_index = w.head_index
        GROUP BY h.request_id, w.head_index
        ORDER BY num_steps DESC, w.head_index
    """,
    "doctor_lora_gate": """
        SELECT w.request_id, r.lora_id, count(*)::INTEGER AS num_steps,
               min(w.step) AS first_step, max(w.step) AS last_step
        FROM why_waiting w
        JOIN _requests r ON r.request_id = w.request_id
        WHERE w.reason = 'lora_gate' AND w.step BETWEEN $from_step AND $to_step
        GROUP BY w.request_id, r.lora_id, r.request_index
        ORDER BY num_steps DESC, r.request_index
    """,
}
"""Each query as it reads over `why_waiting`."""

WORKLOADS = sorted(
    {*ONE_OF_EACH_KIND, REPO / "examples" / "head_of_line_blocking" / "workload.json"}
)


def windows(num_steps: int) -> list[tuple[int, int]]:
    """The whole trace, its halves, its middle, and a few steps from a third of the way in."""
    last = num_steps - 1
    third = num_steps // 3
    return [(0, last), (0, last // 2), (last // 2, last), (third, 2 * third), (third, third + 5)]


def assert_answers_as_the_view(path: Path) -> dict[str, int]:
    """Each query against its reading of the view over every window; the rows each found."""
    found = dict.fromkeys(BY_VIEW, 0)
    with open_trace(path) as trace:
        for name, by_view in BY_VIEW.items():
            for first, last in windows(trace.num_steps):
                window = {"from_step": first, "to_step": last}
                now, before = trace.sql(query(name), window), trace.sql(by_view, window)
                assert now.columns == before.columns, name
                assert now.types == before.types, name
                rows = now.fetchall()
                assert rows == before.fetchall(), f"{path.name}: {name} over {first}..{last}"
                found[name] += len(rows)
    return found


@pytest.mark.parametrize("workload", WORKLOADS, ids=_label)
def test_the_queries_answer_as_the_view(workload: Path, tmp_path: Path) -> None:
    assert_answers_as_the_view(record(workload, tmp_path / "t.duckdb").path)


def test_the_queries_answer_as_the_view_with_every_kind_of_wait(
    pressured: Path, tmp_path: Path
) -> None:
    found = assert_answers_as_the_view(pressured)
    assert found["doctor_waiting"] and found["doctor_lora_gate"], found
    rewritten = assert_answers_as_the_view(every_kind_of_step(pressured, tmp_path / "r.duckdb"))
    assert all(rewritten.values()), rewritten


def test_the_head_of_line_example_has_heads_blocking_requests_that_fit(tmp_path: Path) -> None:
    """The comparison above is not empty where it matters most: heads and requests behind."""
    workload = REPO / "examples" / "head_of_line_blocking" / "workload.json"
    found = assert_answers_as_the_view(record(workload, tmp_path / "t.duckdb").path)
    assert found["doctor_head_of_line"] and found["doctor_waiting"], found
