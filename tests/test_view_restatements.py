"""Views restated to do less work answer as before, and the work they shed stays shed.

`benchmarks/sql/views_before/` keeps the SQL each restated view had before (and, for
`why_waiting_totals`, the query over `why_waiting` it replaces); every view
that is or reads a restated one is read both ways over traces of every kind the project
records (each conformance workload: sync, async, speculative decoding, LoRA, vLLM 0.32
rules; the examples' workloads; a queue that keeps growing; a real vLLM recording of
schema 3) and must give the same column names and types and the same rows in the same
order. The plan tests read DuckDB's physical plan: a (request, step) row of `why_waiting`
does not carry the step columns its stop reason is worded from (worded once per step),
the block lists of `scheduled` are not carried through its sorts, and `budget_spent`
meets each step's row once.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TESTS
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.schema import Trace, open_trace, view_infos
from stepscope.schema.sql_files import strip_comments
from traces import record

sys.path.insert(0, str(REPO / "benchmarks"))
from views_before import before_query, restated

WORKLOADS = [
    *sorted(TESTS.glob("conformance*/*.json")),
    *sorted(REPO.glob("examples/*/workload.json")),
    *sorted(REPO.glob("examples/workloads/*.toml")),
]
ONE_OF_EACH_KIND = {
    TESTS / "conformance" / "03_s03_fcfs_tail_victim_recompute.json",
    TESTS / "conformance" / "22_s18_self_preempt_livelock_abort.json",
    TESTS / "conformance" / "29_no_chunked_prefill_and_rejects.json",
    TESTS / "conformance" / "39_heavy_kv_pressure_fcfs.json",
    TESTS / "conformance_async" / "02_async_preempted_with_output_in_flight.json",
    TESTS / "conformance_spec" / "60_spec_preempt_with_drafts.json",
    TESTS / "conformance_lora" / "async_gate_unscheduled_running.json",
    TESTS / "conformance_v032" / "01_priority_self_preemption_ends_the_pass.json",
    REPO / "examples" / "workloads" / "lora_grammar.toml",
}
"""Preemption, self-preemption and aborts, rejects, KV pressure, async, drafts, the LoRA gate,
vLLM 0.32's rules, grammars: the workloads `make test-fast` compares on (the rest: slow)."""
VLLM_SCHEMA_3 = REPO / "examples" / "sweep_capacity" / "vllm-bench.duckdb"
CHAT = REPO / "examples" / "workloads" / "chat_poisson.toml"


def _label(path: Path) -> str:
    return str(path.relative_to(REPO))


def changed_views() -> list[str]:
    """The views whose query today differs from their query before: restated, or reading one."""
    return [
        info.name for info in view_infos() if before_query(info.name) != strip_comments(info.sql)
    ]


def assert_views_answer_as_before(path: Path) -> None:
    """Each changed view whole, and each of its columns alone over the middle third of the
    steps (what DuckDB prunes and pushes down differs with the columns and the filter)."""
    with open_trace(path) as trace:
        ((num_steps,),) = trace.sql("SELECT count(*) FROM _steps").fetchall()
        middle = f"step BETWEEN {num_steps // 3} AND {2 * num_steps // 3}"
        for name in changed_views():
            before, now = trace.sql(before_query(name)), trace.sql(f"SELECT * FROM {name}")
            assert now.columns == before.columns, name
            assert now.types == before.types, name
            assert now.fetchall() == before.fetchall(), f"{path.name}: {name}"
            where = f"WHERE {middle}" if "step" in now.columns else ""
            for column in now.columns:
                query = f"SELECT {column} FROM {{}} v {where}"
                answers = [
                    trace.sql(query.format(view)).fetchall()
                    for view in (f"({before_query(name)})", name)
                ]
                assert answers[0] == answers[1], f"{path.name}: {name}.{column} {where}"


def test_the_restated_views_and_their_readers_are_compared() -> None:
    assert set(WORKLOADS) >= ONE_OF_EACH_KIND
    assert set(restated()) <= set(changed_views())
    compared = {"why_waiting", "why_waiting_totals", "scheduled", "budget_spent", "prefix_hits"}
    assert compared <= set(changed_views())


@pytest.mark.parametrize(
    "workload",
    [
        workload if workload in ONE_OF_EACH_KIND else pytest.param(workload, marks=pytest.mark.slow)
        for workload in WORKLOADS
    ],
    ids=_label,
)
def test_each_view_answers_as_before(workload: Path, tmp_path: Path) -> None:
    assert_views_answer_as_before(record(workload, tmp_path / "t.duckdb").path)


def test_each_view_answers_as_before_on_a_schema_3_vllm_recording() -> None:
    with open_trace(VLLM_SCHEMA_3) as trace:
        assert trace.schema_version == 3 and trace.meta["engine"] == "vllm"
    assert_views_answer_as_before(VLLM_SCHEMA_3)


@pytest.fixture(scope="module")
def queued(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Chat traffic arriving a little faster than it is served: a queue that keeps growing."""
    text = CHAT.read_text().replace("num_requests = 40", "num_requests = 400")
    workload = parse_toml_workload(text, source="queued chat")
    return record(workload, tmp_path_factory.mktemp("queued") / "queued.duckdb").path


def test_each_view_answers_as_before_under_a_growing_queue(queued: Path) -> None:
    assert_views_answer_as_before(queued)


def plan(trace: Trace, query: str, *, analyze: bool) -> dict[str, Any]:
    """The root operator of the query's physical plan (with rows out of each, if analyzed)."""
    options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
    ((_, text),) = trace.sql(f"EXPLAIN ({options}) {query}").fetchall()
    tree = json.loads(text)
    return {"children": tree["operator"] if analyze else tree}


def operators(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("children", []):
        yield from operators(child)


def name(node: dict[str, Any]) -> str:
    return str(node.get("name") or node.get("operator_name") or "")


def rows_out(node: dict[str, Any]) -> int:
    return int(node.get("intermediate_rows", node.get("operator_cardinality", 0)))


def reads(node: dict[str, Any], table: str) -> bool:
    """Whether a scan of `table` lies in the operator's subtree."""
    return any(
        "SCAN" in name(op) and table in json.dumps(op.get("extra_info", {}))
        for op in operators(node)
    )


def count(trace: Trace, query: str) -> int:
    ((value,),) = trace.sql(query).fetchall()
    return int(value)


STEP_WORDING = (
    "num_scheduled_tokens",
    "token_budget",
    "num_running_before",
    "num_blocks_needed",
    "watermark_blocks",
    "refusal",
)
"""The step columns `why_waiting` words its stop reason from."""


def test_why_waiting_words_each_step_once_not_each_row(queued: Path) -> None:
    """A (request, step) row carries its step's stop reason as worded once per step; only the
    interval join and the LoRA gate's lookup see each row."""
    with open_trace(queued) as trace:
        num_rows = count(trace, "SELECT count(*) FROM why_waiting")
        assert num_rows > 10 * count(trace, "SELECT count(*) FROM steps")
        root = plan(trace, "SELECT * FROM why_waiting", analyze=True)
    per_row = [op for op in operators(root) if rows_out(op) == num_rows]
    carried = {
        column
        for op in per_row
        for column in STEP_WORDING
        if column in json.dumps(op.get("extra_info", {}))
    }
    assert not carried, f"step columns carried with every row: {sorted(carried)}"
    joins = [name(op) for op in per_row if "JOIN" in name(op) or "CROSS_PRODUCT" in name(op)]
    assert len(joins) == 2, joins


def test_scheduled_sorts_its_rows_before_the_block_lists_join_them(queued: Path) -> None:
    with open_trace(queued) as trace:
        root = plan(trace, "SELECT * FROM scheduled", analyze=False)
    windows = [op for op in operators(root) if name(op) == "WINDOW"]
    assert windows and not any(reads(window, "_block_ids") for window in windows)


def test_budget_spent_meets_each_step_once(queued: Path) -> None:
    """The scheduled rows are summed by step before the steps join them, not after."""
    with open_trace(queued) as trace:
        num_steps = count(trace, "SELECT count(*) FROM steps WHERE NOT idle")
        assert count(trace, "SELECT count(*) FROM scheduled") > 2 * num_steps
        root = plan(trace, "SELECT * FROM budget_spent", analyze=True)
    joins = [op for op in operators(root) if "JOIN" in name(op) and reads(op, "_steps")]
    assert joins and max(rows_out(op) for op in joins) <= num_steps
