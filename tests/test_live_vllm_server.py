"""A real vLLM OpenAI server recorded end to end: vLLM's own benchmark and our client.

One server (`--scheduler-cls stepscope.tracer.vllm.RecordingAsyncScheduler` with
async scheduling on, as a stock server runs; a test-only plugin keeps vLLM's CPU
platform from turning it off) is loaded by `vllm bench serve` and by a client that
streams, hangs up mid-stream, sends stop ids and priorities over shared prefixes;
then, once idle, it is stopped with SIGTERM to its process group. Its trace must be
complete, show the pressure it was under, and replay exactly through stepscope's
engine and through vLLM's own scheduler; its checkpoints, and those of a second,
synchronous server (`RecordingScheduler`, loaded by `vllm bench serve` alone), must be
the state stepscope's engine reaches, and a replay from one must be identical.

Not every hang-up becomes an abort: vLLM aborts a request when its server notices
the client gone, and some streams run to their end all the same (seen: 5 of 9
aborted; the others ran to `max_tokens` or a stop id). Nor does every planned
hang-up happen: a stream the server falls behind on has its deltas merged, and
once (in CI) one of the 900-odd-token requests reached `[DONE]` before the client
had read the few chunks it meant to read. The trace must show the aborts the
engine made, only for requests the client planned to hang up on.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from checkpoint_checks import assert_checkpoints_hold
from live_server import LiveServer, bench_serve, client
from stepscope.replay.checkpoints import checkpoint_steps
from stepscope.schema import open_trace

pytestmark = pytest.mark.live

BENCH_PROMPTS = 64
CLIENT_REQUESTS = 48
HUNG_UP_MAX_TOKENS = 900
"""`live_client.py` asks 900-1,000 tokens of the requests it hangs up on, and no others."""
CHECKPOINT_EVERY = 100
"""Steps between the recording's checkpoints (the default, 5,000, is more than it runs)."""


@dataclass(frozen=True)
class ServerRun:
    trace: Path
    counts: dict[str, int]
    bench: str
    log: str
    returncode: int


@pytest.fixture(scope="module")
def served(vllm_live: Any, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> ServerRun:
    trace_dir = tmp_path_factory.mktemp("live-server")
    trace = trace_dir / "server.duckdb"
    server = LiveServer.start(
        vllm_live,
        tiny_model,
        trace,
        "stepscope.tracer.vllm.RecordingAsyncScheduler",
        ["--scheduling-policy", "priority"],
        async_scheduling=True,
        compiled=True,
        settings={"STEPSCOPE_TRACE_CHECKPOINT": f"{CHECKPOINT_EVERY}steps"},
    )
    try:
        bench = bench_serve(vllm_live, server, tiny_model, BENCH_PROMPTS)
        counts = client(vllm_live, server, "--requests", str(CLIENT_REQUESTS), "--priority")
        server.wait_idle(trace)
    finally:
        returncode = server.stop(signal.SIGTERM)
    return ServerRun(trace, counts, bench, server.log_tail(200_000), returncode)


def stepscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stepscope", *args], capture_output=True, text=True, timeout=600
    )


def test_the_load_was_served(served: ServerRun) -> None:
    assert f"Successful requests:                     {BENCH_PROMPTS}" in served.bench
    assert served.counts["failed"] == 0
    assert served.counts["cancelled"] > 0
    assert served.counts["planned_hang_ups"] == CLIENT_REQUESTS // 5


def test_a_normal_stop_leaves_a_complete_trace(served: ServerRun) -> None:
    assert not served.trace.with_name(served.trace.name + ".wal").exists()
    with open_trace(served.trace) as trace:
        assert trace.meta["complete"] == "true"
        assert trace.meta["vllm_version"] == "0.32.0"
        assert trace.config["policy"] == "priority"
        assert trace.config["async_scheduling"] is True


def test_the_trace_shows_preemptions_aborts_chunks_and_stops(served: ServerRun) -> None:
    result = stepscope("info", "--json", str(served.trace))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["summary"]
    assert summary["num_requests"] == BENCH_PROMPTS + CLIENT_REQUESTS
    assert summary["num_preemptions"] > 0
    assert summary["num_aborted"] > 0
    assert summary["finish_reasons"]["stop"] > 0
    with open_trace(served.trace) as trace:
        ((chunks,),) = trace.sql(
            "SELECT count(*) FROM _scheduled WHERE sampled_token_id IS NULL"
        ).fetchall()
        ((stopped_on_ids,),) = trace.sql(
            "SELECT count(*) FROM _events WHERE kind = 'finish' AND stop_reason IS NOT NULL"
        ).fetchall()
        outcomes = trace.sql(
            f"SELECT max_tokens >= {HUNG_UP_MAX_TOKENS}, finish_reason FROM requests"
        ).fetchall()
    assert chunks > 0, "no prefill was chunked"
    assert stopped_on_ids > 0, "no request stopped on a stop id"
    assert sum(hung_up for hung_up, _ in outcomes) == served.counts["planned_hang_ups"]
    assert sum(reason == "abort" for _, reason in outcomes) <= served.counts["cancelled"]
    assert all(hung_up for hung_up, reason in outcomes if reason == "abort"), (
        "a request the client did not hang up on was aborted"
    )


def test_the_trace_replays_exactly(served: ServerRun) -> None:
    result = stepscope("replay", str(served.trace))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("identical"), result.stdout[:3000]


def test_its_checkpoints_are_the_state_the_engine_reaches_and_replay_from(
    served: ServerRun,
) -> None:
    """Taken from the server's live scheduler while it served, with batches in flight."""
    _assert_checkpoints_hold_and_replay(served.trace)


def test_a_sync_servers_checkpoints_are_the_state_the_engine_reaches(
    vllm_live: Any, tiny_model: Path, tmp_path: Path
) -> None:
    """The same on a server that schedules synchronously (`RecordingScheduler`)."""
    trace = tmp_path / "sync-server.duckdb"
    server = LiveServer.start(
        vllm_live,
        tiny_model,
        trace,
        "stepscope.tracer.vllm.RecordingScheduler",
        settings={"STEPSCOPE_TRACE_CHECKPOINT": f"{CHECKPOINT_EVERY}steps"},
    )
    try:
        bench_serve(vllm_live, server, tiny_model, BENCH_PROMPTS)
        server.wait_idle(trace)
    finally:
        server.stop(signal.SIGTERM)
    with open_trace(trace) as opened:
        assert opened.meta["complete"] == "true"
        assert opened.config["async_scheduling"] is False
    _assert_checkpoints_hold_and_replay(trace)


def _assert_checkpoints_hold_and_replay(trace_path: Path) -> None:
    """Every checkpoint is the state a replay from step 0 reaches; a replay from the middle
    one and from the step after the last is identical."""
    with open_trace(trace_path) as trace:
        steps, num_steps = checkpoint_steps(trace), trace.num_steps
    assert steps == list(range(CHECKPOINT_EVERY, num_steps, CHECKPOINT_EVERY))
    assert len(steps) >= 3, num_steps
    assert assert_checkpoints_hold(trace_path) == len(steps)
    for start in (steps[len(steps) // 2], min(steps[-1] + 1, num_steps - 1)):
        result = stepscope("replay", str(trace_path), "--from-step", str(start))
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert result.stdout.startswith("identical"), result.stdout[:3000]


def test_the_trace_replays_exactly_through_vllms_scheduler(
    served: ServerRun, vllm_live: Any
) -> None:
    result = vllm_live.run(
        ["-m", "stepscope", "replay", "--engine", "vllm", str(served.trace)], check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "through vLLM 0.32.0's" in " ".join(result.stdout.split())
    assert "\nidentical: every step decided the same\n" in result.stdout, result.stdout[:3000]


def test_doctor_reads_the_served_trace(served: ServerRun, tmp_path: Path) -> None:
    """`stepscope doctor` on a fresh server recording: one JSON object, each finding's
    evidence a command that runs, each cure checked by a what-if on the recorded arrivals."""
    result = stepscope("doctor", str(served.trace), "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["window"][0] == 0
    for finding in report["findings"]:
        words = shlex.split(finding["evidence"])
        assert words[:3] == ["stepscope", "sql", str(served.trace)], finding["evidence"]
        shown = stepscope(*words[1:], "--csv")
        assert shown.returncode == 0, (finding["evidence"], shown.stderr[-3000:])
        if finding["what_if"] is not None:
            before, after = finding["what_if"]["effect"][finding["what_if"]["target"]]
            assert finding["what_if"]["removes"] or after <= 0.75 * before, finding
