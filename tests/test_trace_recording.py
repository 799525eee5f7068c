"""Recording: crash safety, redaction, the shape of the file, and that decisions are unchanged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import TESTS
from oracle_compare import run_lines
from stepscope.engine import InputError, StepRecord, load_workload
from stepscope.schema.ddl import table_specs
from stepscope.tracer.recorder import _new_buffers
from stepscope.tracer.redact import Redactor
from stepscope.tracer.writer import TraceWriteError, TraceWriter
from traces import case, decode_workload, record

import stepscope

_RECORD_FOREVER = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from traces import decode_workload, record

class Report:
    def on_step(self, record_, scheduler):
        if record_.step % 20 == 0:
            print(record_.step, flush=True)

record(decode_workload(32, 100_000), Path({path!r}), flush_every_steps=16, sinks=[Report()])
"""


def test_kill_9_leaves_a_trace_that_opens_with_every_flushed_step(tmp_path: Path) -> None:
    path = tmp_path / "killed.duckdb"
    script = _RECORD_FOREVER.format(tests=str(TESTS), path=str(path))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    for line in child.stdout:
        if int(line) >= 400:
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    with stepscope.open(path) as trace:
        assert not trace.complete
        steps = [step for (step,) in trace.sql("SELECT step FROM _steps ORDER BY step").fetchall()]
        assert len(steps) >= 300
        assert steps == list(range(len(steps)))
        # Batches are atomic: each recorded step has all of its scheduled rows.
        mismatched = trace.sql(
            "SELECT count(*) FROM _steps s WHERE NOT s.idle AND s.num_scheduled_reqs <> "
            "(SELECT count(*) FROM _scheduled c WHERE c.step = s.step)"
        ).fetchall()
        assert mismatched == [(0,)]
        assert trace.sql("SELECT num_steps FROM summary").fetchall() == [(len(steps),)]


def test_an_interrupted_recording_keeps_its_steps(tmp_path: Path) -> None:
    path = tmp_path / "interrupted.duckdb"

    class Interrupt:
        def on_step(self, record_: StepRecord, scheduler: object) -> None:
            if record_.step == 50:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        record(decode_workload(4, 1000), path, sinks=[Interrupt()], flush_every_steps=8)
    with stepscope.open(path) as trace:
        assert not trace.complete
        assert trace.sql("SELECT count(*) FROM steps").fetchall() == [(51,)]


def test_recording_does_not_change_decisions(tmp_path: Path) -> None:
    workload = case("40")
    path = tmp_path / "t.duckdb"
    record(workload, path)
    lines = run_lines(workload)[:-1]
    expected = [
        (line["step"], list(line.get("num_scheduled_tokens", {}).items())) for line in lines
    ]
    with stepscope.open(path) as trace:
        recorded: dict[int, list[tuple[str, int]]] = {}
        for step, request_id, num_tokens in trace.sql(
            "SELECT step, request_id, num_tokens FROM scheduled ORDER BY step, position"
        ).fetchall():
            recorded.setdefault(step, []).append((request_id, num_tokens))
    assert [(step, recorded.get(step, [])) for step, _ in expected] == expected


def test_redaction_keeps_equality_and_drops_raw_tokens(tmp_path: Path) -> None:
    workload = load_workload(case("10"))  # four prompts sharing a prefix
    plain, redacted = tmp_path / "plain.duckdb", tmp_path / "redacted.duckdb"
    record(workload, plain)
    record(workload, redacted, redactor=Redactor(b"k" * 32))
    query = "SELECT request_id, prompt_token_ids, eos_token_id FROM requests"
    with stepscope.open(plain) as a, stepscope.open(redacted) as b:
        raw, hidden = a.sql(query).fetchall(), b.sql(query).fetchall()
        assert b.meta["redacted"] == "true"
        same_decisions = "SELECT step, request_id, num_tokens, new_block_ids FROM scheduled"
        assert a.sql(same_decisions).fetchall() == b.sql(same_decisions).fetchall()
        raw_tokens = {t for _, prompt, _ in raw for t in prompt}
        hidden_tokens = {t for _, prompt, _ in hidden for t in prompt}
        assert not raw_tokens & hidden_tokens
        sampled = "SELECT list(sampled_token_id) FROM scheduled WHERE sampled_token_id IS NOT NULL"
        assert not set(a.sql(sampled).fetchall()[0][0]) & set(b.sql(sampled).fetchall()[0][0])
    # Shared prefixes survive: equal raw prefixes stay equal, and EOS maps consistently.
    (_, a_prompt, a_eos), (_, b_prompt, _), *_ = hidden
    assert a_prompt[:8] == b_prompt[:8]
    assert len({eos for _, _, eos in hidden}) == 1 and a_eos not in (None, 2)


def test_recorder_buffers_follow_the_ddl() -> None:
    buffers = _new_buffers()
    for spec in table_specs():
        if spec.name in ("_meta", "_config") or spec.name.startswith("_checkpoint"):
            continue
        assert list(buffers[spec.name].columns) == [name for name, _, _ in spec.columns]


def test_every_table_and_column_is_commented_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    record(case("01"), path)
    with duckdb.connect(str(path), read_only=True) as con:
        missing = con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE table_name LIKE '\\_%' ESCAPE '\\' AND (comment IS NULL OR comment = '')"
        ).fetchall()
        tables = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE comment IS NULL OR comment = ''"
        ).fetchall()
    assert missing == [] and tables == []


def test_an_existing_trace_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    path.write_bytes(b"precious")
    with pytest.raises(InputError, match="already exists"):
        record(case("01"), path)
    assert path.read_bytes() == b"precious"


def test_an_unwritable_path_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(TraceWriteError, match="cannot create trace"):
        record(case("01"), tmp_path / "missing-folder" / "t.duckdb")


def test_a_trace_is_never_created_over_an_existing_file(tmp_path: Path) -> None:
    """The writer copies an empty trace into a new file only: what is there stays as it was
    (a check below the commands' own, which refuse an existing output first)."""
    first, second = tmp_path / "first.duckdb", tmp_path / "second.duckdb"
    record(case("01"), first)
    before = first.read_bytes()
    with pytest.raises(TraceWriteError, match=r"cannot create trace.*exists"):
        TraceWriter(first, {})
    assert first.read_bytes() == before
    record(case("02"), second)  # a copy of the same empty trace, filled with its own run
    with stepscope.open(first) as a, stepscope.open(second) as b:
        ids = "SELECT list(request_id ORDER BY request_id) FROM requests"
        assert a.sql(ids).fetchall() != b.sql(ids).fetchall()
        assert a.meta["workload"] != b.meta["workload"]


def test_a_row_by_name_names_exactly_the_tables_columns() -> None:
    buffer = _new_buffers()["_preemptions"]
    row = dict.fromkeys(buffer.columns, 0)
    with pytest.raises(KeyError, match=r"missing columns \['seq'\], unknown \[\]"):
        buffer.append_row({name: 0 for name in row if name != "seq"})
    with pytest.raises(KeyError, match=r"missing columns \[\], unknown \['sequence'\]"):
        buffer.append_row({**row, "sequence": 0})
    buffer.append_row(row)
    assert buffer.num_rows == 1


def test_every_row_builder_writes_its_rows_by_column_name(tmp_path: Path) -> None:
    """Refused, refunded and admission calls, preemptions, requests and steps, as recorded."""
    path = tmp_path / "refund.duckdb"
    record(case("07"), path)
    with stepscope.open(path) as trace:
        calls = trace.sql(
            "SELECT pass, granted, num_free_blocks_before IS NULL AS refunded, count(*) "
            "FROM _allocations GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        refunded = trace.sql(
            "SELECT a.num_new_tokens, p.num_tokens_refunded "
            "FROM _allocations a JOIN _preemptions p USING (step, request_index) "
            "WHERE a.num_free_blocks_before IS NULL"
        ).fetchall()
    assert [call[:3] for call in calls] == [
        ("running", False, False),
        ("running", True, True),
        ("waiting", False, False),
        ("waiting", True, False),
    ]
    ((num_new_tokens, num_tokens_refunded),) = refunded
    assert num_new_tokens == num_tokens_refunded > 0
