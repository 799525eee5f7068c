"""`why_waiting_totals` is `why_waiting` summed by request and reason, at a cost that grows
with steps, requests and events, never with steps times waiting requests.

The sum is checked against `why_waiting` itself, as a multiset and then in the view's
order, over every trace `test_view_restatements` reads (each conformance kind, the
examples, a growing queue, a real vLLM recording of schema 3), over a LoRA and grammar
workload under KV pressure (preempted requests that wait again, grammar waits, LoRA-gate
skips, blocked heads), over that trace with every step's stop rewritten through every
admission stop and NULL, idle steps among the waits, heads that are also LoRA-gated and
grammar waits over both, and over it as schema 3 wrote it. A plan test bounds the rows any
of its operators makes.
"""

from __future__ import annotations

import itertools
import math
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import REPO
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.schema import open_trace
from stepscope.schema.ddl import enum_types
from test_feature_inputs import _as_schema_3
from test_view_restatements import (
    ONE_OF_EACH_KIND,
    VLLM_SCHEMA_3,
    WORKLOADS,
    _label,
    count,
    operators,
    plan,
    queued,
    rows_out,
)
from traces import record

__all__ = ["queued"]

COLUMNS = "request_id, request_index, reason, num_steps, first_step, last_step"
SUMMED = (
    "SELECT w.request_id, r.request_index, w.reason, count(*) AS num_steps, "
    "min(w.step) AS first_step, max(w.step) AS last_step "
    "FROM why_waiting w JOIN _requests r ON r.request_id = w.request_id GROUP BY ALL"
)
BLOCKING_STOPS = ("kv_full", "kv_full_sequence", "chunking_off")
"""The stops that block the waiting head: `head_<stop>` for it, `behind_blocked_head` behind."""
LORA_GRAMMAR = REPO / "examples" / "workloads" / "lora_grammar.toml"


def assert_totals_sum_why_waiting(path: Path) -> None:
    with open_trace(path) as trace:
        totals = trace.sql(f"SELECT {COLUMNS} FROM why_waiting_totals").fetchall()
        summed = trace.sql(f"SELECT * FROM ({SUMMED}) ORDER BY request_index, reason").fetchall()
    assert Counter(totals) == Counter(summed), _difference(totals, summed)
    assert totals == summed, "the same rows, in another order"


def _difference(totals: list[Any], summed: list[Any]) -> str:
    extra, missing = Counter(totals) - Counter(summed), Counter(summed) - Counter(totals)
    extra_rows, missing_rows = sorted(extra, key=repr)[:5], sorted(missing, key=repr)[:5]
    return f"only in the totals: {extra_rows}; only summed: {missing_rows}"


@pytest.mark.parametrize(
    "workload",
    [
        workload if workload in ONE_OF_EACH_KIND else pytest.param(workload, marks=pytest.mark.slow)
        for workload in WORKLOADS
    ],
    ids=_label,
)
def test_the_totals_sum_why_waiting(workload: Path, tmp_path: Path) -> None:
    assert_totals_sum_why_waiting(record(workload, tmp_path / "t.duckdb").path)


def test_the_totals_sum_why_waiting_on_a_schema_3_vllm_recording() -> None:
    assert_totals_sum_why_waiting(VLLM_SCHEMA_3)


def test_the_totals_sum_why_waiting_under_a_growing_queue(queued: Path) -> None:
    assert_totals_sum_why_waiting(queued)


@pytest.fixture(scope="module")
def pressured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Adapters one at a time, slow grammars and few KV blocks: every kind of wait at once."""
    text = LORA_GRAMMAR.read_text()
    for old, new in (
        ("num_requests = 24", "num_requests = 60"),
        ("num_blocks = 128", "num_blocks = 24"),
        ("max_loras = 2", "max_loras = 1"),
        ("compile_steps = 2", "compile_steps = 5"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    workload = parse_toml_workload(text, source="pressured lora_grammar")
    return record(workload, tmp_path_factory.mktemp("pressured") / "p.duckdb").path


def test_the_totals_sum_why_waiting_with_every_kind_of_wait(pressured: Path) -> None:
    with open_trace(pressured) as trace:
        kinds = trace.sql(
            "SELECT (SELECT count(*) FROM requests WHERE num_preemptions > 0), "
            "(SELECT count(DISTINCT reason) FROM why_waiting WHERE reason LIKE 'head_%'), "
            "(SELECT count(*) FROM why_waiting WHERE reason = 'lora_gate'), "
            "(SELECT count(*) FROM why_waiting WHERE reason = 'grammar_wait')"
        ).fetchall()
    assert all(kinds[0]), kinds
    assert_totals_sum_why_waiting(pressured)


def every_kind_of_step(pressured: Path, path: Path) -> Path:
    """A copy of `pressured` at `path` whose steps take every admission stop and NULL in turn,
    some idle, some with a LoRA-gated or a running request as the blocked head, and whose
    grammars keep some requests waiting, into their waits after a preemption too."""
    shutil.copy(pressured, path)
    stops = [None, *enum_types()["admission_stop"]]
    # A cycle coprime to the idle (11) and blocked-head (3) cycles, so every stop meets each.
    cycle = next(n for n in itertools.count(len(stops)) if math.gcd(n, 33) == 1)
    stops += [None] * (cycle - len(stops))
    with duckdb.connect(str(path)) as con:
        for index, stop in enumerate(stops):
            con.execute(
                "UPDATE _steps SET admission_stop = ? WHERE step % ? = ?",
                [stop, cycle, index],
            )
        con.execute("UPDATE _steps SET idle = true WHERE step % 11 = 4")
        con.execute(
            "UPDATE _steps SET blocked_request_index = (SELECT min(request_index) FROM _events e "
            "WHERE e.step = _steps.step AND e.kind = 'skip') "
            "WHERE step % 3 = 0 AND step IN (SELECT step FROM _events WHERE kind = 'skip')"
        )
        con.execute(
            "UPDATE _steps SET blocked_request_index = "
            "(SELECT min(request_index) FROM _scheduled c "
            "WHERE c.step = _steps.step AND c.kind = 'running') WHERE step % 3 = 1"
        )
        con.execute(
            "UPDATE _requests SET grammar_ready_step = arrival_step + 40 "
            "WHERE request_index % 4 = 1"
        )
        con.execute(
            "UPDATE _requests SET grammar_ready_step = (SELECT max(step) + 6 FROM _events e "
            "WHERE e.request_index = _requests.request_index AND e.kind = 'preempt') "
            "WHERE request_index IN (SELECT request_index FROM _events WHERE kind = 'preempt')"
        )
    return path


def test_the_totals_sum_why_waiting_whatever_each_step_says(
    pressured: Path, tmp_path: Path
) -> None:
    """Every stop and NULL at the waits' steps, idle steps among them, and the exceptions
    overlapping: a head that is LoRA-gated, a head under a stop that does not block it, a
    "head" that is running, grammar waits over skips and heads, and into the wait after a
    preemption."""
    path = every_kind_of_step(pressured, tmp_path / "rewritten.duckdb")
    stops = [None, *enum_types()["admission_stop"]]
    with open_trace(path) as trace:
        distinct = trace.sql("SELECT DISTINCT reason FROM why_waiting").fetchall()
        reasons = {reason for (reason,) in distinct}
        idle_while_waiting = count(
            trace, "SELECT count(*) FROM _steps WHERE idle AND num_waiting_before > 0"
        )
    assert reasons == {
        *(stop for stop in stops if stop not in BLOCKING_STOPS),
        *(f"head_{stop}" for stop in BLOCKING_STOPS),
        "behind_blocked_head",
        "lora_gate",
        "grammar_wait",
    }
    assert idle_while_waiting > 0
    assert_totals_sum_why_waiting(path)


def test_the_totals_sum_why_waiting_on_an_older_trace(pressured: Path, tmp_path: Path) -> None:
    older = _as_schema_3(pressured, tmp_path / "older.duckdb")
    with open_trace(older) as trace:
        assert trace.schema_version == 3
    assert_totals_sum_why_waiting(older)


def test_no_operator_of_the_totals_makes_a_row_per_waiting_request_and_step(
    queued: Path,
) -> None:
    """The rows any operator makes stay within a few per step, event and request, where
    why_waiting has many more (so a sum over why_waiting's rows would fail here)."""
    with open_trace(queued) as trace:
        facts = count(
            trace,
            "SELECT (SELECT count(*) FROM _steps) + (SELECT count(*) FROM _events) "
            "+ (SELECT count(*) FROM _requests)",
        )
        bound = 2 * facts
        assert count(trace, "SELECT count(*) FROM why_waiting") > bound
        root = plan(trace, "SELECT * FROM why_waiting_totals", analyze=True)
    assert max(rows_out(op) for op in operators(root)) <= bound
