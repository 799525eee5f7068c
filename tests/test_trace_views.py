"""Every view answers its question with the right rows on recorded scenarios.

Expected rows come from the scenarios' known behaviour (spec §13 and the real-vLLM
expected files), never from a snapshot of the views themselves.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED_CONFORMANCE, read_jsonl
from stepscope.engine import load_workload
from stepscope.schema import Trace, logical_tables, view_infos
from traces import case, record

import stepscope

NEXT = SHARED_CONFORMANCE.parent / "conformance-next"


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("traces")
    paths = {}
    for name in ("03", "04", "07", "10", "16", "39"):
        paths[name] = folder / f"{name}.duckdb"
        record(case(name), paths[name])
    return paths


def rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    with stepscope.open(path) as trace:
        return trace.sql(query).fetchall()


def test_every_view_is_tested_here() -> None:
    source = Path(__file__).read_text()
    untested = [v.name for v in view_infos() if f"FROM {v.name}" not in source]
    assert not untested, f"views without a test: {untested}"


def test_why_preempted_fcfs_tail(traces: dict[str, Path]) -> None:
    (row,) = rows(
        traces["03"],
        "SELECT step, request_id, needed_by, policy, self_preempted, needed_tokens, "
        "needed_blocks, free_blocks, num_computed_tokens_discarded, num_blocks_freed, "
        "num_tokens_refunded, num_preemptions, why FROM why_preempted",
    )
    # r0 reaches a block boundary at step 6 with no free block; FCFS evicts the tail r1,
    # which had computed its 7-token prompt and 5 outputs in 3 blocks.
    assert row[:12] == (6, "r1", "r0", "fcfs", False, 1, 1, 0, 12, 3, 0, 1)
    assert "fcfs takes r1 (the newest running request)" in row[12]


def test_why_preempted_priority_refund(traces: dict[str, Path]) -> None:
    (row,) = rows(
        traces["07"],
        "SELECT step, request_id, needed_by, policy, victim_priority, needed_by_priority, "
        "num_tokens_refunded FROM why_preempted",
    )
    # L (priority 5) was already scheduled its token when H (priority 0) needed a block.
    assert row == (6, "L", "H", "priority", 5, 0, 1)


def test_why_waiting_names_the_blocked_head(traces: dict[str, Path]) -> None:
    result = rows(traces["03"], "SELECT step, request_id, reason, blocked_head FROM why_waiting")
    assert result == [
        (7, "r1", "head_kv_full_sequence", "r1"),
        (8, "r1", "head_kv_full_sequence", "r1"),
        (3, "r2", "head_kv_full_sequence", "r2"),
        (4, "r2", "head_kv_full_sequence", "r2"),
        (5, "r2", "head_kv_full_sequence", "r2"),
        (6, "r2", "preempted_this_step", None),
        (7, "r2", "behind_blocked_head", "r1"),
        (8, "r2", "behind_blocked_head", "r1"),
    ]
    (detail,) = rows(traces["03"], "SELECT detail FROM why_waiting WHERE step = 7 LIMIT 1")
    assert detail == ("head needs 4 block(s), 2 free (full_sequence check)",)


def test_why_waiting_totals_sums_each_request_s_waits_by_reason(traces: dict[str, Path]) -> None:
    result = rows(
        traces["03"],
        "SELECT request_id, reason, num_steps, first_step, last_step FROM why_waiting_totals",
    )
    # The rows of why_waiting above, per request and reason: r2's three steps as the blocked
    # head are one row, its two behind r1 another; its preempted step one of its own.
    assert result == [
        ("r1", "head_kv_full_sequence", 2, 7, 8),
        ("r2", "behind_blocked_head", 2, 7, 8),
        ("r2", "head_kv_full_sequence", 3, 3, 5),
        ("r2", "preempted_this_step", 1, 6, 6),
    ]


def test_budget_spent_splits_decode_prefill_recompute(traces: dict[str, Path]) -> None:
    result = rows(
        traces["03"],
        "SELECT step, decode_tokens, prefill_tokens, recompute_tokens, unused_tokens "
        "FROM budget_spent WHERE step IN (0, 1, 9)",
    )
    # Step 9: r1 recomputes prompt 7 + 6 outputs, r2 prefills its 3-token prompt.
    assert result == [(0, 0, 14, 0, 18), (1, 2, 0, 0, 30), (9, 0, 3, 13, 16)]


def test_spec_acceptance_per_request(tmp_path: Path) -> None:
    """60: the oracle's lines verify A 4 times (12 drafts, all accepted), B 7 times (5 of 21).

    tests/test_spec_views.py checks every cut of every spec scenario.
    """
    workload = Path(__file__).parent / "conformance_spec" / "60_spec_preempt_with_drafts.json"
    path = record(workload, tmp_path / "60.duckdb").path
    result = rows(
        path,
        "SELECT request_id, num_drafts, num_draft_tokens, num_accepted_tokens, acceptance_rate "
        "FROM spec_acceptance WHERE per = 'request'",
    )
    assert result == [("A", 4, 12, 12, 1.0), ("B", 7, 21, 5, 0.2381)]


def test_requests_summarise_each_life(traces: dict[str, Path]) -> None:
    result = rows(
        traces["03"],
        "SELECT request_id, finish_step, finish_reason, num_output_tokens, num_preemptions, "
        "ttft_steps FROM requests",
    )
    assert result == [
        ("r0", 8, "stop", 9, 0, 0),
        ("r1", 11, "stop", 9, 1, 0),
        ("r2", 10, "stop", 2, 0, 6),
    ]


def test_requests_record_aborts(traces: dict[str, Path]) -> None:
    result = rows(traces["16"], "SELECT request_id, finish_step, finish_reason FROM requests")
    assert result == [("r0", 2, "abort"), ("r1", 3, "stop"), ("r2", 2, "abort"), ("r3", 3, "stop")]


def test_kv_usage_follows_free_blocks(traces: dict[str, Path]) -> None:
    result = rows(
        traces["03"],
        "SELECT step, num_free_blocks_after_schedule, num_used_blocks, usage, num_preemptions "
        "FROM kv_usage WHERE step IN (2, 6, 9)",
    )
    assert result == [(2, 0, 6, 1.0, 0), (6, 2, 4, 0.6667, 1), (9, 1, 5, 0.8333, 0)]


def test_kv_usage_by_group_is_the_pool_with_one_group(traces: dict[str, Path]) -> None:
    result = rows(
        traces["03"],
        "SELECT step, kv_cache_group, attention_type, num_held_blocks, usage "
        "FROM kv_usage_by_group WHERE step IN (2, 6, 9)",
    )
    assert result == [(2, 0, "full", 6, 1.0), (6, 0, "full", 4, 0.6667), (9, 0, "full", 5, 0.8333)]


def test_kv_usage_by_group_tells_the_window_group_from_the_full_one(tmp_path: Path) -> None:
    # 71 (real vLLM 0.33.0's block tables): at step 5 the window group has freed B's first
    # block (A's at step 4), so it holds 5 blocks to the full group's 7; at step 6 B's new
    # full block is 5, the block A's window freed, and the window group stays at 5.
    trace = record(load_workload(NEXT / "71_hybrid_sw_window_free.json"), tmp_path / "71.duckdb")
    assert rows(
        trace.path,
        "SELECT step, kv_cache_group, attention_type, sliding_window, num_held_blocks, usage "
        "FROM kv_usage_by_group WHERE step IN (4, 5, 6)",
    ) == [
        (4, 0, "full", None, 7, 0.4667),
        (4, 1, "sliding_window", 8, 6, 0.4),
        (5, 0, "full", None, 7, 0.4667),
        (5, 1, "sliding_window", 8, 5, 0.3333),
        (6, 0, "full", None, 8, 0.5333),
        (6, 1, "sliding_window", 8, 5, 0.3333),
    ]


def test_prefix_hits_tell_shared_prefixes_from_recovery(traces: dict[str, Path]) -> None:
    # 04: the preempted r1 re-finds 2 of its own freed blocks (8 tokens) at step 9.
    assert rows(
        traces["04"],
        "SELECT step, request_id, kind, hit_tokens, category FROM prefix_hits WHERE hit_tokens > 0",
    ) == [(9, "r1", "resumed", 8, "recompute_after_preemption")]
    # 10: b (8 tokens, same as a) may hit only 7 tokens, so 1 block; c and d hit 8.
    assert rows(
        traces["10"],
        "SELECT request_id, hit_tokens, tokens_to_compute, category FROM prefix_hits "
        "WHERE hit_tokens > 0",
    ) == [("b", 4, 4, "shared_prefix"), ("c", 8, 1, "shared_prefix"), ("d", 8, 2, "shared_prefix")]


def _storms_from_expected(path: Path, gap: int = 8, minimum: int = 3) -> list[tuple[int, int, int]]:
    """The storm definition applied in Python to real vLLM's per-step preemptions."""
    preempted = [
        (line["step"], len(line["preempted_req_ids"]))
        for line in read_jsonl(path)[:-1]
        if line.get("preempted_req_ids")
    ]
    storms: list[list[tuple[int, int]]] = []
    for step, count in preempted:
        if storms and step - storms[-1][-1][0] <= gap:
            storms[-1].append((step, count))
        else:
            storms.append([(step, count)])
    return [
        (storm[0][0], storm[-1][0], sum(c for _, c in storm))
        for storm in storms
        if sum(c for _, c in storm) >= minimum
    ]


def test_preemption_storms(traces: dict[str, Path]) -> None:
    expected_file = case("39").with_name(case("39").stem + ".expected.jsonl")
    expected = _storms_from_expected(expected_file)
    assert expected, "scenario 39 should have preemption storms"
    assert (
        rows(traces["39"], "SELECT first_step, last_step, num_preemptions FROM preemption_storms")
        == expected
    )
    victims = Counter(
        victim
        for line in read_jsonl(expected_file)[:-1]
        if expected[0][0] <= line["step"] <= expected[0][1]
        for victim in line.get("preempted_req_ids", [])
    )
    (repeat,) = rows(
        traces["39"], "SELECT repeat_victims FROM preemption_storms ORDER BY storm LIMIT 1"
    )
    assert set(repeat[0] or []) == {v for v, n in victims.items() if n > 1}


def test_request_timeline_is_a_whole_life(traces: dict[str, Path]) -> None:
    result = rows(
        traces["03"],
        "SELECT step, what, num_tokens, computed_after, blocks_held FROM request_timeline "
        "WHERE request_id = 'r1' AND what <> 'sampled'",
    )
    assert result[:3] == [(0, "arrive", None, None, None), (0, "admit+prefill", 7, 7, 2),
                          (1, "decode", 1, 8, 2)]  # fmt: skip
    assert (6, "preempted", None, 0, 0) in result
    assert (9, "resume+recompute", 13, 13, 4) in result
    assert result[-1] == (11, "finish", None, None, 0)


def test_allocations_in_call_order(traces: dict[str, Path]) -> None:
    result = rows(
        traces["03"],
        "SELECT step, request_id, pass, num_new_tokens, num_blocks_needed, "
        "num_free_blocks_before, num_free_blocks_after, granted, refusal, block_ids "
        "FROM allocations WHERE step IN (6, 9) ORDER BY seq",
    )
    assert result == [
        (6, "r0", "running", 1, 1, 0, 0, False, "slots", []),
        (6, "r0", "running", 1, 1, 3, 2, True, None, [6]),
        (9, "r1", "waiting", 13, 4, 6, 2, True, None, [6, 5, 2, 1]),
        (9, "r2", "waiting", 3, 1, 2, 1, True, None, [4]),
    ]


def test_scheduled_outputs_events_steps_and_summary(traces: dict[str, Path]) -> None:
    path = traces["03"]
    assert rows(
        path,
        "SELECT position, request_id, kind, num_tokens, new_block_ids FROM scheduled "
        "WHERE step = 9",
    ) == [(0, "r1", "resumed", 13, [6, 5, 2, 1]), (1, "r2", "new", 3, [4])]
    assert rows(
        path, "SELECT step, token_ids, finish_reason FROM outputs WHERE request_id = 'r2'"
    ) == [
        (9, [7], None),
        (10, [2], "stop"),
    ]
    assert rows(path, "SELECT kind, count(*) FROM events GROUP BY kind ORDER BY kind") == [
        ("arrive", 3), ("admit", 3), ("resume", 1), ("preempt", 1), ("finish", 3),
    ]  # fmt: skip
    assert rows(
        path, "SELECT step, admission_stop, blocked_request_id FROM steps WHERE step IN (3, 6)"
    ) == [(3, "kv_full_sequence", "r2"), (6, "preempted_this_step", None)]
    assert rows(
        path,
        "SELECT num_steps, num_requests, num_finished, num_preemptions, num_scheduled_tokens, "
        "finish_reasons FROM summary",
    ) == [(13, 3, 3, 1, 46, {"stop": 3})]


def test_config_and_meta(traces: dict[str, Path]) -> None:
    workload = load_workload(case("03"))
    (config,) = rows(traces["03"], "SELECT block_size, num_blocks, policy FROM config")
    assert config == (workload.config.block_size, workload.config.num_blocks, "fcfs")
    meta = dict(rows(traces["03"], "SELECT key, value FROM meta"))
    assert meta["complete"] == "true" and meta["engine"] == "stepscope"
    assert meta["num_steps"] == "13"


def _free_counts(trace: Trace) -> list[tuple[int, int]]:
    return trace.sql(
        "SELECT num_free_blocks_before, num_free_blocks_after FROM allocations ORDER BY seq"
    ).fetchall()


def test_allocation_free_counts_are_the_engines(tmp_path: Path) -> None:
    """The free counts the view derives for plain grants equal the engine's, call by call."""
    from stepscope.engine.kv_cache_manager import KVCacheManager

    observed: list[tuple[int, int]] = []
    # The running pass allocates through allocate_running_slots, the waiting pass through
    # allocate_slots: the trace's allocations are both, in call order.
    originals = {
        name: getattr(KVCacheManager, name) for name in ("allocate_slots", "allocate_running_slots")
    }

    def observing(original: Any) -> Any:
        def call(self: KVCacheManager, *args: Any, **kwargs: Any) -> Any:
            before = self.get_num_free_blocks()
            result = original(self, *args, **kwargs)
            observed.append((before, self.get_num_free_blocks()))
            return result

        return call

    for name, original in originals.items():
        setattr(KVCacheManager, name, observing(original))
    try:
        for name in ("39", "40"):
            observed.clear()
            path = tmp_path / f"{name}.duckdb"
            record(case(name), path)
            with stepscope.open(path) as trace:
                assert _free_counts(trace) == observed, name
    finally:
        for name, original in originals.items():
            setattr(KVCacheManager, name, original)


def test_preemptions(traces: dict[str, Path]) -> None:
    assert rows(
        traces["03"],
        "SELECT step, request_id, needed_by, policy, num_computed_tokens_discarded, "
        "num_blocks_freed, num_tokens_refunded, num_preemptions, num_free_blocks_before, "
        "num_free_blocks_after FROM preemptions",
    ) == [(6, "r1", "r0", "fcfs", 12, 3, 0, 1, 0, 3)]


def test_logical_tables_are_what_a_reader_sees_in_tables_sql_order(tmp_path: Path) -> None:
    names = logical_tables()
    assert names[:3] == ("_meta", "_config", "_requests") and len(names) == len(set(names))
    path = record(case("01"), tmp_path / "t.duckdb").path
    with Trace(path) as trace:
        stored = trace.sql("SELECT table_name FROM duckdb_tables() WHERE NOT temporary").fetchall()
        assert sorted(names) == sorted(name for (name,) in stored)
        for name in names:
            trace.sql(f"SELECT * FROM {name} LIMIT 0").fetchall()
