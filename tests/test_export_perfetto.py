"""`stepscope export --perfetto`: the timeline agrees with the trace's views, step by step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from export_traces import record_traces
from perfetto_reader import Slice, Timeline, read_timeline
from stepscope.engine.workload import parse_workload
from stepscope.schema import open_trace
from test_cli import stepscope
from traces import record

STATES = {
    "admit+prefill": "prefill",
    "prefill": "prefill",
    "recompute": "recompute",
    "resume+recompute": "recompute",
    "decode": "decoding",
}
"""The request_timeline view's chunk kinds and the request-track slice each falls in."""


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return record_traces(tmp_path_factory.mktemp("perfetto"))


@pytest.fixture(scope="module")
def timelines(traces: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("timelines")
    timelines = {}
    for name, trace in traces.items():
        out = folder / f"{name}.pftrace"
        result = stepscope("export", str(trace), "--perfetto", str(out))
        assert result.returncode == 0, result.stderr
        assert "open it at https://ui.perfetto.dev" in result.stderr
        timelines[name] = read_timeline(out)
    return timelines


def _rows(trace: Path, sql: str) -> list[dict[str, Any]]:
    with open_trace(trace) as opened:
        relation = opened.sql(sql)
        return [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]


def _engine_name(timeline: Timeline) -> str:
    return next(n for n in timeline.track_names.values() if n.startswith("engine steps"))


def _step_starts(timeline: Timeline) -> dict[int, int]:
    engine = timeline.on(_engine_name(timeline))
    return {s.args["step"]: s.ts for s in engine if s.name in ("schedule", "idle")}


NAMES = ["storm", "refund", "self_preempt_abort", "idle", "untimed"]


@pytest.mark.parametrize("name", NAMES)
def test_every_step_is_a_schedule_model_update_run_with_its_args(
    name: str, traces: dict[str, Path], timelines: dict[str, Timeline]
) -> None:
    steps = _rows(traces[name], "SELECT * FROM steps ORDER BY step")
    engine = timelines[name].on(_engine_name(timelines[name]))
    now = 0
    for step in steps:
        phases = ("idle",) if step["idle"] else ("schedule", "model", "update")
        if name == "untimed":
            durations = (1000,) if step["idle"] else (333, 333, 334)
        elif step["idle"]:
            durations = (0,)
        else:
            durations = (step["schedule_ns"], step["model_ns"], step["update_ns"])
        for phase, duration in zip(phases, durations, strict=True):
            got = engine.pop(0)
            assert (got.name, got.ts, got.dur) == (phase, now, duration), step["step"]
            now += duration
            if phase in ("schedule", "idle"):
                _assert_step_args(got, step)
    assert engine == []


def _assert_step_args(got: Slice, step: dict[str, Any]) -> None:
    expected = {
        "step": step["step"],
        "token_budget": step["token_budget"],
        "num_scheduled_tokens": step["num_scheduled_tokens"],
        "num_scheduled_reqs": step["num_scheduled_reqs"],
        "num_preemptions": step["num_preemptions"],
        "admission_stop": step["admission_stop"],
        "running_pass_end": step["running_pass_end"],
        "blocked_request": step["blocked_request_id"],
    }
    assert got.args == {k: v for k, v in expected.items() if v is not None}


@pytest.mark.parametrize("name", NAMES)
def test_counters_follow_free_blocks_budget_and_queues(
    name: str, traces: dict[str, Path], timelines: dict[str, Timeline]
) -> None:
    expected: dict[str, list[int]] = {
        "free KV blocks": [],
        "token budget used": [],
        "running requests": [],
        "waiting requests": [],
    }
    for step in _rows(traces[name], "SELECT * FROM steps ORDER BY step"):
        samples = [
            ("free KV blocks", step["num_free_blocks_before"]),
            ("running requests", step["num_running_before"]),
            ("waiting requests", step["num_waiting_before"]),
        ]
        if not step["idle"]:
            samples += [
                ("free KV blocks", step["num_free_blocks_after_schedule"]),
                ("token budget used", step["num_scheduled_tokens"]),
            ]
        samples += [
            ("free KV blocks", step["num_free_blocks_after_update"]),
            ("token budget used", 0 if step["idle"] else step["num_scheduled_tokens"]),
            ("running requests", step["num_running_after"]),
            ("waiting requests", step["num_waiting_after"]),
        ]
        for counter, value in samples:
            if value is not None:
                expected[counter].append(value)
    got = {k: [value for _, value in v] for k, v in timelines[name].counters.items()}
    assert got == expected
    timeline = timelines[name]
    assert {timeline.track_names[u] for u in timeline.counter_tracks} == set(expected)


@pytest.mark.parametrize("name", NAMES)
def test_each_request_track_shows_its_chunks_decodes_and_waits(
    name: str, traces: dict[str, Path], timelines: dict[str, Timeline]
) -> None:
    timeline = timelines[name]
    starts = _step_starts(timeline)
    chunks = _rows(
        traces[name],
        "SELECT request_id, step, what FROM request_timeline "
        "WHERE what IN ('admit+prefill', 'prefill', 'recompute', 'resume+recompute', 'decode')",
    )
    assert chunks
    for chunk in chunks:
        at = starts[chunk["step"]]
        covering = [
            s.name for s in timeline.on(chunk["request_id"]) if s.dur and s.ts <= at < s.ts + s.dur
        ]
        assert covering == [STATES[chunk["what"]]], chunk
    requests = _rows(traces[name], "SELECT request_id, finish_reason FROM requests")
    for request in requests:
        marks = [s for s in timeline.on(request["request_id"]) if s.name == "finished"]
        expected = [] if request["finish_reason"] in (None, "abort") else [request["finish_reason"]]
        assert [m.args["detail"] for m in marks] == expected


@pytest.mark.parametrize("name", NAMES)
def test_every_preemption_is_a_flow_to_the_victims_preempted_slice(
    name: str, traces: dict[str, Path], timelines: dict[str, Timeline]
) -> None:
    timeline = timelines[name]
    starts = _step_starts(timeline)
    preemptions = _rows(traces[name], "SELECT step, request_id, needed_by FROM preemptions")
    flows = [
        (
            source.ts,
            timeline.track_names[target.track],
            timeline.track_names[source.track],
            source.name,
            target.name,
            target.ts,
        )
        for source, target in timeline.flows()
    ]
    expected = [
        (starts[p["step"]], p["request_id"], p["needed_by"], "needs room", "preempted")
        for p in preemptions
    ]
    assert sorted(f[:5] for f in flows) == sorted(expected)
    assert all(f[0] == f[5] for f in flows)
    if name in ("storm", "refund", "self_preempt_abort"):
        assert preemptions


def test_a_trace_without_timings_counts_steps(timelines: dict[str, Timeline]) -> None:
    timeline = timelines["untimed"]
    assert _engine_name(timeline) == "engine steps (no recorded times: 1 µs is one step)"
    assert all(ts == step * 1000 for step, ts in _step_starts(timeline).items())


def test_an_abort_ends_the_request_with_a_mark(
    traces: dict[str, Path], timelines: dict[str, Timeline]
) -> None:
    (aborted,) = _rows(
        traces["self_preempt_abort"],
        "SELECT request_id FROM requests WHERE finish_reason = 'abort'",
    )
    names = [s.name for s in timelines["self_preempt_abort"].on(aborted["request_id"])]
    assert names[-1] == "aborted"


def test_bad_input_is_one_line_and_leaves_no_file(traces: dict[str, Path], tmp_path: Path) -> None:
    storm = str(traces["storm"])
    workload = tmp_path / "workload.json"
    workload.write_text('{"requests": []}')
    (tmp_path / "folder.pftrace").mkdir()
    cases = [
        (
            ["export", str(tmp_path / "missing.duckdb"), "--perfetto", str(tmp_path / "a")],
            "no such",
        ),
        (["export", str(workload), "--perfetto", str(tmp_path / "b")], "not"),
        (["export", storm, "--perfetto", str(tmp_path / "folder.pftrace")], "is a folder"),
        (["export", storm, "--perfetto", str(workload / "c.pftrace")], "no such folder"),
        (
            ["export", storm, "--perfetto", str(tmp_path / "nowhere" / "d.pftrace")],
            "no such folder",
        ),
    ]
    for args, words in cases:
        result = stepscope(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, args
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.pftrace", "workload.json"]


def test_an_existing_file_is_replaced_whole(traces: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "t.pftrace"
    out.write_bytes(b"old")
    kept = stepscope("export", str(traces["refund"]), "--perfetto", str(out))
    assert kept.returncode == 2 and "give --force to replace it" in kept.stderr
    assert out.read_bytes() == b"old"
    args = ("export", str(traces["refund"]), "--perfetto", str(out), "--force")
    assert stepscope(*args).returncode == 0
    assert read_timeline(out).on("engine steps")
    assert [p.name for p in tmp_path.iterdir()] == ["t.pftrace"]


def test_worker_processes_write_the_same_file(
    traces: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stepscope.tracer.export import perfetto

    alone, parallel = tmp_path / "alone.pftrace", tmp_path / "parallel.pftrace"
    perfetto.export_perfetto(traces["storm"], alone, workers=1)
    monkeypatch.setattr(perfetto, "_BATCH_ROWS", 64)
    monkeypatch.setattr(perfetto, "_PARALLEL_FROM_STEPS", 0)
    perfetto.export_perfetto(traces["storm"], parallel, workers=2)
    assert parallel.read_bytes() == alone.read_bytes()


def test_a_window_is_the_whole_timeline_cut_at_its_edges(
    traces: dict[str, Path], timelines: dict[str, Timeline], tmp_path: Path
) -> None:
    """Steps 100..199 of the storm: its steps as the whole timeline lays them out, shifted to
    start at 0; each request's slices cut at the edges, its marks inside; a flow only where
    both ends are inside; no track for a request that ended before or arrived after."""
    out = tmp_path / "window.pftrace"
    said = stepscope("export", str(traces["storm"]), "--perfetto", str(out),
                     "--from-step", "100", "--to-step", "199")  # fmt: skip
    assert said.returncode == 0 and said.stderr.startswith(f"wrote {out}: 100 steps, ")
    window, whole = read_timeline(out), timelines["storm"]
    starts = _step_starts(whole)
    begin, end = starts[100], starts[200]
    assert _step_starts(window) == {step: starts[step] - begin for step in range(100, 200)}

    def cut(track: str) -> list[tuple[str, int, int]]:
        kept = []
        for s in whole.on(track):
            first, last = max(s.ts, begin), min(s.ts + s.dur, end)
            if (s.dur and first < last) or (not s.dur and begin <= s.ts < end):
                kept.append((s.name, first - begin, last - first))
        return kept

    requests = _rows(traces["storm"], "SELECT request_id FROM requests ORDER BY request_index")
    shown = set(window.track_names.values())
    for request in requests:
        expected = cut(request["request_id"])
        if request["request_id"] not in shown:
            assert expected == [], request
            continue
        got = [(s.name, s.ts, s.dur) for s in window.on(request["request_id"])]
        assert got == expected, request
    assert len(shown & {r["request_id"] for r in requests}) < len(requests)
    flows = [(a.ts + begin, b.ts + begin) for a, b in window.flows()]
    assert flows and flows == [(a.ts, b.ts) for a, b in whole.flows() if begin <= a.ts < end]


def test_a_window_outside_the_trace_is_one_line_and_leaves_no_file(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "w.pftrace"
    for args, words in [
        (["--from-step", "5000"], "--from-step 5000: "),
        (["--from-step", "9", "--to-step", "3"], "--to-step 3: it is before --from-step 9"),
        (["--from-step", "9", "--to-step", "3", "--parquet", str(tmp_path / "pq")], "--to-step 3"),
    ]:
        result = stepscope("export", str(traces["storm"]), "--perfetto", str(out), *args)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, args
    assert list(tmp_path.iterdir()) == []


def test_a_trace_without_steps_exports_whole_but_not_windowed(tmp_path: Path) -> None:
    """A run that never stepped is laid out as the empty timeline it is; a window asks for
    steps it does not hold."""
    workload = json.loads((REPO / "examples" / "preemption_storm" / "workload.json").read_text())
    workload["requests"] = []
    empty, out = tmp_path / "empty.duckdb", tmp_path / "empty.pftrace"
    record(parse_workload(json.dumps(workload), source="empty"), empty)
    whole = stepscope("export", str(empty), "--perfetto", str(out))
    assert whole.returncode == 0 and whole.stderr.startswith(f"wrote {out}: 0 steps, ")
    windowed = stepscope("export", str(empty), "--perfetto", str(out), "--force",
                         "--from-step", "0")  # fmt: skip
    assert windowed.returncode == 2
    assert windowed.stderr.strip() == f"error: --from-step 0: {empty} has no step"


def test_step_times_are_kept_from_the_first_step_held() -> None:
    """A recording whose oldest segments were deleted starts deep into its run: nothing is
    kept for the steps before its first (they would cost memory for every step it lost)."""
    import pyarrow as pa
    from stepscope.tracer.export.perfetto_steps import StepTimes

    first = 5_000_000
    times = StepTimes()
    times.add(
        pa.RecordBatch.from_pydict(
            {"step": [first, first + 1, first + 3], "start_ns": [0, 100, 300],
             "schedule_ns": [10, 10, 10], "model_ns": [50, 50, 50], "update_ns": [40, 40, 40]}
        )
    )  # fmt: skip
    assert (times.num_steps, len(times.starts)) == (3, 4)
    assert [times.start(step) for step in (0, first, first + 1, first + 3, first + 9)] == [
        0, 0, 100, 300, 400,
    ]  # fmt: skip
    assert times.update(first + 1) == 160
