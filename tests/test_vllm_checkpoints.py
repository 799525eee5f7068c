"""Checkpoints taken from vLLM's live scheduler: each equals the state stepscope's engine
reaches replaying the trace from step 0, and a replay can start from one.

Workloads run through vLLM 0.33.0's real scheduler (scripted model, `driver.py`) with
`STEPSCOPE_TRACE_CHECKPOINT` set: the conformance cases sync and async, prefix caching
with shared prompts and preemptions (the storm, under prefix caching), speculative
decoding and LoRA (the features corpus) and grammar waits. Skipped without the venv.
A real CPU engine's checkpoints: `test_live_vllm_engine.py`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from checkpoint_checks import assert_checkpoints_hold
from conftest import REPO, SHARED_CONFORMANCE, TESTS
from stepscope.replay.checkpoints import checkpoint_steps, read_checkpoint
from stepscope.schema import open_trace
from stepscope.tracer.vllm.attach.checkpoint_interval import CheckpointInterval
from stepscope.tracer.vllm.attach.settings import checkpoint_interval
from test_next_conformance import DRAFTERS_AND_CADENCE, SHARED_NEXT
from vllm_env import VllmPython

EVERY = 3
"""Steps between checkpoints: most steps of a short case are a checkpoint or right after one."""
CHECKPOINT_ENV = {"STEPSCOPE_TRACE_CHECKPOINT": f"{EVERY}steps"}

FEATURES = SHARED_CONFORMANCE.parent / "conformance-features"
STORM = REPO / "examples" / "preemption_storm" / "workload.json"
_GROUPS: dict[str, tuple[list[Path], dict[str, Any]]] = {
    "sync": (sorted((TESTS / "conformance").glob("*.json")), {}),
    "extra": (sorted((TESTS / "conformance_extra").glob("*.json")), {}),
    "async": (
        sorted((TESTS / "conformance").glob("*.json"))
        + sorted((TESTS / "conformance_async").glob("*.json")),
        {"async_scheduling": True},
    ),
    "features": (
        sorted(FEATURES.glob("*_spec_*.json")) + sorted(FEATURES.glob("*_lora_*.json")),
        {},
    ),
    "grammar": (sorted((TESTS / "grammar_workloads").glob("*.json")), {}),
    "next": (
        sorted(
            path
            for path in SHARED_NEXT.glob("*.json")
            if path.name.startswith(DRAFTERS_AND_CADENCE)
        ),
        {},
    ),
    "storm": ([STORM], {"enable_prefix_caching": False}),
    "storm-async": ([STORM], {"enable_prefix_caching": False, "async_scheduling": True}),
    "storm-prefix": ([STORM], {"enable_prefix_caching": True}),
    "storm-prefix-async": ([STORM], {"enable_prefix_caching": True, "async_scheduling": True}),
}

pytestmark = pytest.mark.slow


def _cases() -> list[Any]:
    return [
        pytest.param(group, path, id=f"{group}/{path.stem}")
        for group, (paths, _) in _GROUPS.items()
        for path in paths
    ]


def _copy(group: str, source: Path, knobs: dict[str, Any], out: Path) -> Path:
    raw = json.loads(source.read_text())
    raw["config"] = {**raw["config"], **knobs}
    path = out / f"{group}-{source.stem}.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.fixture(scope="module")
def recorded(vllm: VllmPython, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every workload here recorded through vLLM 0.33.0 with checkpoints, in one call."""
    out = tmp_path_factory.mktemp("vllm-checkpoints")
    workloads = out / "workloads"
    workloads.mkdir()
    paths = [
        _copy(group, path, knobs, workloads)
        for group, (group_paths, knobs) in _GROUPS.items()
        for path in group_paths
    ]
    vllm.record(out, paths, {}, env=CHECKPOINT_ENV)
    return out


# ----- state equality ---------------------------------------------------------


def _expected_steps(num_steps: int) -> list[int]:
    return [step for step in range(EVERY, num_steps, EVERY)]


@pytest.mark.parametrize(("group", "workload"), _cases())
def test_each_vllm_checkpoint_is_the_state_the_engine_reaches(
    recorded: Path, group: str, workload: Path
) -> None:
    trace_path = recorded / f"{group}-{workload.stem}.duckdb"
    with open_trace(trace_path) as trace:
        assert trace.meta["outside_subset"] == ""
        num_steps = trace.num_steps
        steps = checkpoint_steps(trace)
    assert steps == _expected_steps(num_steps)
    assert_checkpoints_hold(trace_path)


def test_the_corpus_has_queued_batches_hashes_and_preemptions(recorded: Path) -> None:
    """The cases that matter are in the corpus: a checkpoint with a batch in the queue,
    one with cached blocks, one with a preempted request waiting."""
    found = {"batch": False, "hash": False, "preempted": False}
    for trace_path in sorted(recorded.glob("storm-prefix-async-*.duckdb")):
        with open_trace(trace_path) as trace:
            for step in checkpoint_steps(trace):
                state = read_checkpoint(trace, step)
                found["batch"] |= state.pending_batch is not None
                found["hash"] |= any(h is not None for h in state.block_pool.block_hashes)
                found["preempted"] |= any(r.num_preemptions for r in state.requests)
    assert all(found.values()), found


# ----- a replay from a vLLM checkpoint ------------------------------------------


def _replay_from(trace_path: Path, step: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stepscope", "replay", str(trace_path), "--from-step", str(step)],
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize("group", ["storm", "storm-async"])
def test_a_replay_from_a_vllm_checkpoint_is_identical_without_prefix_caching(
    recorded: Path, group: str
) -> None:
    """Without prefix caching no hash is looked up, so the restored state decides as vLLM's did."""
    trace_path = recorded / f"{group}-workload.duckdb"
    with open_trace(trace_path) as trace:
        assert not trace.config["enable_prefix_caching"]
        steps = checkpoint_steps(trace)
    for step in (steps[len(steps) // 2], steps[len(steps) // 2] + 1):
        result = _replay_from(trace_path, step)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert result.stdout.startswith("identical"), result.stdout[:3000]


@pytest.mark.parametrize("group", ["storm-prefix", "storm-prefix-async"])
def test_a_replay_from_a_vllm_checkpoint_is_identical_with_prefix_caching(
    recorded: Path, group: str
) -> None:
    """A restored block keeps vLLM's hash; the engine hashes as vLLM does, so a prefix hit on
    a restored block is found as vLLM found it."""
    trace_path = recorded / f"{group}-workload.duckdb"
    with open_trace(trace_path) as trace:
        assert trace.config["enable_prefix_caching"]
        steps = checkpoint_steps(trace)
    for step in steps[1::16]:
        result = _replay_from(trace_path, step)
        assert result.stdout.startswith("identical"), result.stdout[:3000]


# ----- the setting ---------------------------------------------------------------


def _config(**stepscope: object) -> SimpleNamespace:
    return SimpleNamespace(additional_config={"stepscope": stepscope} if stepscope else {})


def test_the_interval_in_steps_or_seconds_through_either_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STEPSCOPE_TRACE_CHECKPOINT", raising=False)
    assert checkpoint_interval(_config()) == CheckpointInterval(every_steps=5000)
    assert checkpoint_interval(_config(checkpoint="30s")) == CheckpointInterval(every_s=30.0)
    assert checkpoint_interval(_config(checkpoint="off")) is None
    assert checkpoint_interval(_config(checkpoint=0)) is None
    monkeypatch.setenv("STEPSCOPE_TRACE_CHECKPOINT", "250steps")
    assert checkpoint_interval(_config(checkpoint="30s")) == CheckpointInterval(every_steps=250)
    monkeypatch.setenv("STEPSCOPE_TRACE_CHECKPOINT", "0.5s")
    assert checkpoint_interval(_config()) == CheckpointInterval(every_s=0.5)
    monkeypatch.setenv("STEPSCOPE_TRACE_CHECKPOINT", "OFF")
    assert checkpoint_interval(_config()) is None


@pytest.mark.parametrize("value", ["5000", "5x", "-3steps", "0steps", "s", "10 minutes"])
def test_a_malformed_interval_is_one_line_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE_CHECKPOINT", value)
    with pytest.raises(ValueError, match=r"^STEPSCOPE_TRACE_CHECKPOINT=") as raised:
        checkpoint_interval(_config())
    assert "\n" not in str(raised.value)
    monkeypatch.delenv("STEPSCOPE_TRACE_CHECKPOINT")
    with pytest.raises(ValueError, match=r"^additional_config stepscope\.checkpoint="):
        checkpoint_interval(_config(checkpoint=value))


def test_steps_and_seconds_decide_which_steps_are_due() -> None:
    steps = CheckpointInterval(every_steps=4)
    assert [s for s in range(13) if steps.due(s, 0.0)] == [4, 8, 12]
    seconds = CheckpointInterval(every_s=30.0)
    assert not seconds.due(0, 99.0), "step 0's state is empty"
    assert not seconds.due(7, 29.9) and seconds.due(7, 30.0)


def test_a_malformed_interval_in_vllm_stops_only_the_recording(
    vllm: VllmPython, tmp_path: Path
) -> None:
    """As any setting: one error line in vLLM's log, the engine serves unrecorded."""
    trace = tmp_path / "t.duckdb"
    env = {"STEPSCOPE_TRACE": str(trace), "STEPSCOPE_TRACE_CHECKPOINT": "5x"}
    result = _serve_from_settings(vllm, STORM, env)
    assert json.loads(result.stdout.splitlines()[-1]) == {
        "recording": False,
        "wrapped": [],
        "complete": True,
    }
    (line,) = [line for line in result.stderr.splitlines() if "STEPSCOPE_TRACE_CHECKPOINT" in line]
    assert "not recording this engine: STEPSCOPE_TRACE_CHECKPOINT='5x'" in line
    assert not trace.exists()


def test_seconds_and_off_through_vllm(vllm: VllmPython, tmp_path: Path) -> None:
    """`off` takes none; a tiny interval in seconds takes one at (nearly) every step."""
    workload = _copy("storm", STORM, {}, tmp_path)
    for value in ("off", "0.000001s"):
        out = tmp_path / value
        out.mkdir()
        vllm.record(out, [workload], {}, env={"STEPSCOPE_TRACE_CHECKPOINT": value})
        with open_trace(out / f"{workload.stem}.duckdb") as trace:
            steps, num_steps = checkpoint_steps(trace), trace.num_steps
        if value == "off":
            assert steps == []
        else:
            assert steps == list(range(1, num_steps))
            assert_checkpoints_hold(out / f"{workload.stem}.duckdb")


def _serve_from_settings(
    vllm: VllmPython, workload: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """The workload through `RecordingScheduler`, recording as `vllm serve` would: only if
    the settings in `env` say so."""
    return vllm.run(
        [
            str(TESTS / "vllm_harness.py"),
            "settings",
            str(workload),
            "stepscope.tracer.vllm.RecordingScheduler",
        ],
        env=env,
    )


def test_an_iteration_that_never_becomes_a_step_leaves_no_checkpoint(
    vllm: VllmPython, tmp_path: Path
) -> None:
    """An abort once the engine is done (the frontend's, for a stop string) starts an
    iteration, and a due checkpoint with it, that never schedules: the trace holds none
    past its last step."""
    trace_path = tmp_path / "late.duckdb"
    workload = SHARED_CONFORMANCE / "03_s03_fcfs_tail_victim_recompute.json"
    vllm.run(
        [str(TESTS / "vllm_harness.py"), "late_abort", str(trace_path), str(workload)],
        env={"STEPSCOPE_TRACE_CHECKPOINT": "1steps"},
    )
    with open_trace(trace_path) as trace:
        steps, num_steps = checkpoint_steps(trace), trace.num_steps
    assert steps == list(range(1, num_steps))
    assert_checkpoints_hold(trace_path)


def test_a_redacted_recording_takes_no_checkpoints(vllm: VllmPython, tmp_path: Path) -> None:
    trace_path = tmp_path / "redacted.duckdb"
    env = {**CHECKPOINT_ENV, "STEPSCOPE_TRACE": str(trace_path), "STEPSCOPE_TRACE_REDACT": "1"}
    _serve_from_settings(vllm, STORM, env)
    with open_trace(trace_path) as trace:
        assert trace.meta["redacted"] == "true"
        assert trace.num_steps > EVERY
        assert checkpoint_steps(trace) == []
