"""vLLM's real scheduler, recorded by `stepscope.tracer.vllm`, against stepscope's engine.

vLLM's `Scheduler` / `AsyncScheduler` run on a CPU with a scripted model, stepped as
`EngineCore` steps them, with the recorder attached. Every recorded table (budgets,
allocation calls, preemptions, the SchedulerOutput, sampled tokens, events) must be
row-for-row what stepscope's engine records for the same workload under that vLLM
version's rules, and replaying either trace through either engine must decide the
same. The recordings run under both supported versions: 0.33.0 (the `vllm` venv) and
0.32.0 (`vllm_live`). Skipped where a venv is not built (see vllm_env.py).
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS, read_jsonl
from random_workloads import random_workload
from stepscope.engine import load_workload
from stepscope.replay.diff import Classification, compare_steps, diff_traces
from stepscope.replay.exact import replay_exact
from stepscope.schema import open_trace
from stepscope.tracer.thread_priority import RECORDER_NICENESS
from traces import record, step_summaries
from vllm_env import VllmPython, hashing_knobs, table_differences

CONFORMANCE = sorted((TESTS / "conformance").glob("*.json"))
EXTRA = sorted((TESTS / "conformance_extra").glob("*.json"))
ASYNC = sorted((TESTS / "conformance_async").glob("*.json"))
ASYNC_V032 = sorted((TESTS / "conformance_v032" / "async").glob("*.json"))
MODES = {"sync": {}, "async": {"async_scheduling": True}}
VERSIONS = {"0.33.0": "vllm", "0.32.0": "vllm_live"}
"""Each supported vLLM version, and the fixture of the venv that has it."""
NUM_RANDOM = 20

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Recorded:
    """Every recording workload of this module, recorded by one vLLM version in one call."""

    vllm: VllmPython
    version: str
    out: Path
    workloads: dict[str, list[Path]]
    """Group name (`sync`, `async`, `aborts-sync`, ...) -> the workload files recorded."""

    def trace(self, workload: Path) -> Path:
        return self.out / f"{workload.stem}.duckdb"


NOT_IN_0_32 = ("disable_lookahead_block_hashes",)
"""Knobs vLLM 0.32 does not have (it hashes blocks plainly either way): its recordings
leave them out."""


def _copy(
    group: str, source: Path | dict[str, Any], knobs: dict[str, Any], out: Path, version: str
) -> Path:
    """The workload under `knobs`, named `group-stem` so every recording has its own trace."""
    raw = json.loads(source.read_text()) if isinstance(source, Path) else dict(source)
    raw["config"] = {**raw["config"], **knobs}
    if version.startswith("0.32."):
        raw["config"] = {k: v for k, v in raw["config"].items() if k not in NOT_IN_0_32}
    stem = source.stem if isinstance(source, Path) else raw.pop("name")
    path = out / f"{group}-{stem}.json"
    path.write_text(json.dumps(raw))
    return path


def _random_late_aborts(mode: str) -> list[dict[str, Any]]:
    workloads = []
    for seed in range(NUM_RANDOM):
        raw = random_workload(
            random.Random(9_000 + seed),
            max_requests=16,
            async_scheduling=mode == "async",
            late_aborts=True,
        )
        workloads.append({**raw, "name": f"random{seed}"})
    return workloads


def _recording_workloads(out: Path, version: str) -> dict[str, list[Path]]:
    out.mkdir()
    sources: dict[str, tuple[list[Any], dict[str, Any]]] = {
        "sync": (CONFORMANCE + EXTRA, {}),
        "async": (CONFORMANCE + EXTRA + ASYNC, MODES["async"]),
        "aborts-sync": (_random_late_aborts("sync"), {}),
        "aborts-async": (_random_late_aborts("async"), {}),
        "v032": (ASYNC_V032, {}),
    }
    return {
        group: [_copy(group, source, knobs, out, version) for source in group_sources]
        for group, (group_sources, knobs) in sources.items()
    }


@pytest.fixture(scope="module", params=list(VERSIONS))
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Both vLLM versions, each recording every workload here once (vLLM's import is slow)."""
    vllm: VllmPython = request.getfixturevalue(VERSIONS[request.param])
    out = tmp_path_factory.mktemp(f"vllm-{request.param}")
    workloads = _recording_workloads(out / "workloads", request.param)
    vllm.record(out, [path for paths in workloads.values() for path in paths], {})
    return Recorded(vllm, request.param, out, workloads)


def _engine_trace(workload_path: Path, knobs: dict[str, object], out: Path) -> Path:
    workload = load_workload(workload_path)
    if knobs:
        workload = workload.with_config(workload.config.with_knobs(knobs))
    record(workload, out)
    return out


def _assert_same_as_engine(
    recorded: Recorded,
    workloads: list[Path],
    tmp_path: Path,
    knobs: dict[str, object] | None = None,
) -> None:
    """Each vLLM trace diffs as identical to the engine's, and every recorded row matches.

    The engine follows the rules of the vLLM version that recorded.
    """
    failures = []
    knobs = {**(knobs or {}), "vllm_version": recorded.version}
    for path in workloads:
        vllm_trace = recorded.trace(path)
        engine_trace = _engine_trace(
            path, {**knobs, **hashing_knobs(vllm_trace)}, tmp_path / f"engine-{path.stem}.duckdb"
        )
        with open_trace(engine_trace) as ours, open_trace(vllm_trace) as theirs:
            steps = compare_steps(ours, theirs)
            assert theirs.meta["vllm_version"] == recorded.version
        problems = []
        if steps.classification is not Classification.IDENTICAL:
            problems.append(
                f"diff: {steps.classification} at step "
                f"{steps.first_decision_step} {steps.decision_fields}"
            )
        problems += table_differences(engine_trace, vllm_trace)
        if problems:
            failures.append(f"{path.name}: " + "; ".join(problems))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("mode", MODES)
def test_conformance_workloads_record_as_the_engine_does(
    recorded: Recorded, tmp_path: Path, mode: str
) -> None:
    _assert_same_as_engine(recorded, recorded.workloads[mode], tmp_path)


def test_the_v2_model_runners_output_records_alike(vllm: VllmPython, tmp_path: Path) -> None:
    """The V2 runner ships resumed requests among the new ones; the trace is the same."""
    workloads = [p for p in CONFORMANCE if p.name[:2] in {"05", "30", "39", "40"}]
    knobs = MODES["async"]
    vllm.record(tmp_path, workloads, knobs, env={"VLLM_USE_V2_MODEL_RUNNER": "1"})
    with open_trace(tmp_path / f"{workloads[0].stem}.duckdb") as trace:
        assert trace.meta["use_v2_model_runner"] == "true"
    _assert_same_as_engine(Recorded(vllm, "0.33.0", tmp_path, {}), workloads, tmp_path, knobs)


def test_async_expected_files_are_what_vllm_records(
    recorded: Recorded, request: pytest.FixtureRequest
) -> None:
    """The committed async cases are still real vLLM output (conformance_async/, _v032/)."""
    group, cases = ("v032", ASYNC_V032) if recorded.version == "0.32.0" else ("async", ASYNC)
    for path in cases:
        summaries = step_summaries(recorded.out / f"{group}-{path.stem}.duckdb")
        expected_path = path.with_name(path.stem + ".expected.jsonl")
        if request.config.getoption("--regenerate-async"):
            expected_path.write_text("".join(json.dumps(row) + "\n" for row in summaries))
        assert summaries == read_jsonl(expected_path), path.name


@pytest.mark.parametrize("mode", MODES)
def test_random_workloads_with_late_aborts_record_as_the_engine_does(
    recorded: Recorded, tmp_path: Path, mode: str
) -> None:
    _assert_same_as_engine(recorded, recorded.workloads[f"aborts-{mode}"], tmp_path)


def test_vllm_traces_replay_exactly_through_both_engines(recorded: Recorded) -> None:
    chosen = {p.stem for p in CONFORMANCE if p.name[:2] in {"03", "07", "16", "22", "30", "40"}}
    traces = [
        recorded.trace(path)
        for mode in MODES
        for path in recorded.workloads[mode]
        if path.stem.removeprefix(f"{mode}-") in chosen
    ]
    assert len(traces) == 2 * len(chosen)
    for trace in traces:
        assert replay_exact(trace).divergence is None, f"{trace} via stepscope"
    outcomes = json.loads(recorded.vllm.harness("replay", *map(str, traces)))
    assert outcomes == {str(trace): "identical" for trace in traces}


def test_engine_trace_replays_identically_through_vllm(vllm: VllmPython, tmp_path: Path) -> None:
    trace = record(next(p for p in CONFORMANCE if p.name.startswith("05")), tmp_path / "t.duckdb")
    result = vllm.stepscope("replay", str(trace.path), "--engine", "vllm")
    assert result.returncode == 0, result.stdout
    assert "identical: every step decided the same" in result.stdout
    assert "vllm.v1.core.sched.scheduler.Scheduler" in result.stdout


def test_replay_with_a_custom_vllm_scheduler_class_shows_where_it_departs(
    vllm: VllmPython, tmp_path: Path
) -> None:
    """A team's scheduler plugin, diffed against vLLM's own on recorded traffic."""
    plugin = vllm.site / "half_budget.py"
    plugin.write_text(
        "from vllm.v1.core.sched.scheduler import Scheduler\n\n\n"
        "class HalfBudgetScheduler(Scheduler):\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        super().__init__(*args, **kwargs)\n"
        "        self.max_num_scheduled_tokens //= 2\n"
    )
    trace = record(next(p for p in CONFORMANCE if p.name.startswith("30")), tmp_path / "t.duckdb")
    result = vllm.stepscope(
        "replay",
        str(trace.path),
        "--engine",
        "vllm",
        "--scheduler-cls",
        "half_budget.HalfBudgetScheduler",
        "--json",
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["scheduler_class"] == "half_budget.HalfBudgetScheduler"
    assert report["diff"]["classification"] == "decision"
    stock = vllm.stepscope(
        "replay",
        str(trace.path),
        "--engine",
        "vllm",
        "--scheduler-cls",
        "vllm.v1.core.sched.scheduler.Scheduler",
    )
    assert stock.returncode == 0, stock.stdout


def test_recording_classes_record_only_when_asked(vllm: VllmPython, tmp_path: Path) -> None:
    workload = next(p for p in CONFORMANCE if p.name.startswith("05"))
    schedulers = "stepscope.tracer.vllm.attach.schedulers."
    off = json.loads(vllm.harness("settings", str(workload), schedulers + "RecordingScheduler"))
    assert off == {"recording": False, "wrapped": [], "complete": True}

    for mode, cls in (("sync", "RecordingScheduler"), ("async", "RecordingAsyncScheduler")):
        knobs = MODES[mode]
        trace = tmp_path / f"{mode}.duckdb"
        settings = [a for k, v in knobs.items() for a in ("--set", f"{k}={json.dumps(v)}")]
        on = json.loads(
            vllm.harness(
                "settings",
                str(workload),
                schedulers + cls,
                *settings,
                env={"STEPSCOPE_TRACE": str(trace)},
            )
        )
        assert on["recording"] and len(on["wrapped"]) == 7, on
        with open_trace(trace) as opened:
            assert opened.complete
            assert opened.meta["engine"] == "vllm"
            assert opened.meta["vllm_version"] == "0.33.0"
            assert opened.meta["scheduler_class"].endswith(cls)
            assert opened.meta["outside_subset"] == ""
        engine = _engine_trace(workload, knobs, tmp_path / f"engine-{mode}.duckdb")
        assert diff_traces(engine, trace).identical


def test_a_servers_recorder_threads_run_at_the_lowest_priority_unless_set_to_normal(
    vllm: VllmPython, tmp_path: Path
) -> None:
    """A recording class in a server (no planned workload): its row builder and writer at
    nice 19 (Linux), the engine thread as it was; `STEPSCOPE_TRACE_PRIORITY=normal` keeps them
    at the engine's."""
    if not sys.platform.startswith("linux"):
        pytest.skip("a thread's own nice value is Linux's")
    workload = next(p for p in CONFORMANCE if p.name.startswith("05"))
    cls = "stepscope.tracer.vllm.attach.schedulers.RecordingScheduler"
    for priority, expected in (("low", RECORDER_NICENESS), ("normal", None)):
        env = {"STEPSCOPE_TRACE": str(tmp_path / f"{priority}.duckdb")}
        env["STEPSCOPE_TRACE_PRIORITY"] = priority
        nice = json.loads(vllm.harness("priorities", str(workload), cls, env=env))
        engine = nice.pop("engine")
        assert engine < RECORDER_NICENESS
        threads = {"stepscope-row-builder", "stepscope-trace-writer"}
        assert nice == dict.fromkeys(threads, engine if expected is None else expected)


def test_a_vllm_version_not_supported_runs_on_unrecorded(vllm: VllmPython, tmp_path: Path) -> None:
    trace = tmp_path / "t.duckdb"
    workload = next(p for p in CONFORMANCE if p.name.startswith("05"))
    cls = "stepscope.tracer.vllm.attach.schedulers.RecordingScheduler"
    result = vllm.run(
        [str(TESTS / "vllm_harness.py"), "unsupported", "0.31.0", str(workload), cls],
        env={"STEPSCOPE_TRACE": str(trace)},
    )
    assert json.loads(result.stdout) == {"recording": False, "wrapped": [], "complete": True}
    said = [line for line in result.stderr.splitlines() if "stepscope" in line]
    assert len(said) == 1 and said[0].endswith(
        "not recording this engine: vLLM 0.31.0 is not supported (supported: 0.32.x, 0.33.0)"
    ), said
    assert not trace.exists()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_recording_lets_go_of_requests_the_scheduler_has_freed(
    vllm: VllmPython, tmp_path: Path, mode: str
) -> None:
    """A server's recording would otherwise keep each request's sampling params for good,
    and `record --engine vllm`'s step loop each request's ending (36 requests under KV
    pressure, 4 of them aborted)."""
    workload = next(p for p in CONFORMANCE if p.name.startswith("39"))
    knobs = [arg for k, v in MODES[mode].items() for arg in ("--set", f"{k}={json.dumps(v)}")]
    held = json.loads(vllm.harness("held", str(tmp_path / "t.duckdb"), str(workload), *knobs))
    assert len(held["unshipped"]) < held["requests"]
    assert set(held["sampling"]) <= set(held["unshipped"])
    assert set(held["admitted"]) <= set(held["unshipped"])
    assert len(held["finishes"]) > 3 and not any(held["finishes"])


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_running_pass_calls_vllms_allocate_slots_unwrapped(
    vllm: VllmPython, tmp_path: Path, mode: str
) -> None:
    """First come, first served, a refused running call is always followed by a preemption,
    so the running pass calls vLLM's own `allocate_slots`; a step that preempts reads the
    refused call from `schedule()`'s frame and wraps the rest of the step. (The rows those
    steps record are the engine's: `test_conformance_workloads_record_as_the_engine_does`.)"""
    workload = next(p for p in CONFORMANCE if p.name.startswith("39"))
    knobs = [arg for k, v in MODES[mode].items() for arg in ("--set", f"{k}={json.dumps(v)}")]
    counts = json.loads(vllm.harness("tapped", str(tmp_path / "t.duckdb"), str(workload), *knobs))
    assert counts["preempting_steps"] > 0
    assert counts["tapped"] < counts["calls"] / 2
    with open_trace(tmp_path / "t.duckdb") as trace:
        assert trace.meta["complete"] == "true"
        assert trace.meta.get("outside_subset", "") == ""


def test_the_wrong_class_for_the_mode_is_noted(vllm: VllmPython, tmp_path: Path) -> None:
    """Subclassing `Scheduler` under async scheduling silently drops async behaviour."""
    trace = tmp_path / "t.duckdb"
    workload = next(p for p in CONFORMANCE if p.name.startswith("01"))
    vllm.harness(
        "settings",
        str(workload),
        "stepscope.tracer.vllm.attach.schedulers.RecordingScheduler",
        "--set",
        "async_scheduling=true",
        env={"STEPSCOPE_TRACE": str(trace)},
    )
    with open_trace(trace) as opened:
        assert (
            opened.meta["outside_subset"] == "async_scheduling with a synchronous scheduler class"
        )


def test_trace_directory_names_one_file_per_engine(vllm: VllmPython, tmp_path: Path) -> None:
    workload = next(p for p in CONFORMANCE if p.name.startswith("01"))
    directory = tmp_path / "traces"
    directory.mkdir()
    cls = "stepscope.tracer.vllm.attach.schedulers.RecordingScheduler"
    env = {"STEPSCOPE_TRACE": str(directory) + "/", "STEPSCOPE_TRACE_REDACT": "1"}
    vllm.harness("settings", str(workload), cls, env=env)
    (trace,) = directory.glob("vllm-*.duckdb")
    with open_trace(trace) as opened:
        assert opened.meta["redacted"] == "true"
        prompts = opened.sql("SELECT prompt_token_ids FROM requests").fetchall()
    raw = load_workload(workload).requests[0].prompt_token_ids
    assert all(list(raw) != list(row[0]) for row in prompts)
    # An existing file is never overwritten: the engine runs, unrecorded, and says why.
    result = vllm.run(
        [str(TESTS / "vllm_harness.py"), "settings", str(workload), cls],
        env={"STEPSCOPE_TRACE": str(trace)},
    )
    assert json.loads(result.stdout)["recording"] is False
    assert "already exists" in result.stderr


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("where", "prefix", "after"),
    [("step", "30", 5), ("admission", "30", 1), ("preemption", "05", 1), ("preemption", "31", 1)],
)
def test_a_failing_recording_never_stops_vllm(
    vllm: VllmPython, tmp_path: Path, mode: str, where: str, prefix: str, after: int
) -> None:
    """The recording fails handing a step over, or in the allocation tap, which runs inside
    vLLM's `schedule()`: the recording stops there, vLLM's call is made once and goes on."""
    trace = tmp_path / "t.duckdb"
    workload = next(p for p in CONFORMANCE if p.name.startswith(prefix))
    settings = [a for k, v in MODES[mode].items() for a in ("--set", f"{k}={json.dumps(v)}")]
    harness = [str(TESTS / "vllm_harness.py"), "failing", str(trace), str(workload), str(after)]
    result = vllm.run([*harness, where, *settings])
    outcome = json.loads(result.stdout)
    assert outcome == {
        "complete": True,
        "active": False,
        "unfinished": 0,
        "unwrapped": True,
        "calls": after + 1,
    }
    assert "recording failed" in result.stderr
    assert "disk full (injected)" in result.stderr
    with open_trace(trace) as opened:  # closed, marked incomplete, every step before it kept
        assert not opened.complete
        if where == "step":
            assert opened.sql("SELECT count(*) FROM steps").fetchall() == [(after,)]


def test_replay_engine_vllm_needs_vllm(tmp_path: Path) -> None:
    """In a Python without vLLM (the test venv), --engine vllm says so in one line."""
    from test_cli import stepscope

    trace = record(next(p for p in CONFORMANCE if p.name.startswith("01")), tmp_path / "t.duckdb")
    result = stepscope("replay", str(trace.path), "--engine", "vllm")
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: --engine vllm: vLLM is not installed")
    assert len(result.stderr.strip().splitlines()) == 1
