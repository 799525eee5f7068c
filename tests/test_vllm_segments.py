"""vLLM's own scheduler recorded into a folder of segments (`STEPSCOPE_TRACE_SEGMENT`): each
segment opens with a checkpoint taken from vLLM's live state and replays exactly on its own,
through stepscope's engine and through vLLM's scheduler; a recorder slower than the engine
drops steps and resumes at a checkpoint, and the engine is never held up.

Workloads run through vLLM 0.33.0's real scheduler (scripted model, `driver.py`), sync and
async. Skipped without the venv.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from checkpoint_checks import assert_checkpoints_hold
from conftest import REPO, TESTS
from stepscope.replay.checkpoints import checkpoint_steps
from stepscope.schema import open_trace
from stepscope.schema.recording_layout import scan
from vllm_env import VllmPython

STORM = REPO / "examples" / "preemption_storm" / "workload.json"
SEGMENT_ENV = {"STEPSCOPE_TRACE_SEGMENT": "7steps", "STEPSCOPE_TRACE_CHECKPOINT": "off"}
_GROUPS: dict[str, tuple[list[Path], dict[str, Any]]] = {
    "sync": (sorted((TESTS / "conformance").glob("*.json"))[:12], {}),
    "async": (sorted((TESTS / "conformance_async").glob("*.json")), {"async_scheduling": True}),
    "storm-prefix": ([STORM], {"enable_prefix_caching": True}),
    "storm-prefix-async": ([STORM], {"enable_prefix_caching": True, "async_scheduling": True}),
}

pytestmark = pytest.mark.slow


def _copy(group: str, source: Path, knobs: dict[str, Any], out: Path) -> Path:
    raw = json.loads(source.read_text())
    raw["config"] = {**raw["config"], **knobs}
    path = out / f"{group}-{source.stem}.json"
    path.write_text(json.dumps(raw))
    return path


def _cases() -> list[Any]:
    return [
        pytest.param(group, path, id=f"{group}/{path.stem}")
        for group, (paths, _) in _GROUPS.items()
        for path in paths
    ]


@pytest.fixture(scope="module")
def recorded(vllm: VllmPython, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every workload recorded through vLLM 0.33.0 into segments of 7 steps, in one call."""
    out = tmp_path_factory.mktemp("vllm-segments")
    workloads = out / "workloads"
    workloads.mkdir()
    paths = [
        _copy(group, path, knobs, workloads)
        for group, (group_paths, knobs) in _GROUPS.items()
        for path in group_paths
    ]
    vllm.record(out, paths, {}, env=SEGMENT_ENV)
    return out


@pytest.mark.parametrize(("group", "workload"), _cases())
def test_each_segment_opens_with_the_state_the_engine_reaches_and_replays_from_it(
    recorded: Path, vllm: VllmPython, group: str, workload: Path
) -> None:
    folder = recorded / f"{group}-{workload.stem}"
    segments = scan(folder)
    with open_trace(folder) as trace:
        num_steps = trace.num_steps
    assert [s.first_step for s in segments] == list(range(0, num_steps, 7))
    assert_checkpoints_hold(folder)  # every segment's checkpoint, in this process
    later = segments[1:]
    for segment in {later[len(later) // 2], later[-1]} if later else ():
        first = str(segment.first_step)
        ours = vllm.stepscope("replay", str(folder), "--from-step", first)
        assert ours.returncode == 0, f"from {first}: {ours.stdout}{ours.stderr}"


def test_a_segment_replays_through_vllms_own_scheduler(recorded: Path, vllm: VllmPython) -> None:
    folder = recorded / "storm-prefix-workload"
    assert len(scan(folder)) > 2
    result = vllm.stepscope("replay", "--engine", "vllm", str(folder))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_recorder_behind_the_engine_drops_steps_and_resumes_at_checkpoints(
    vllm: VllmPython, tmp_path: Path
) -> None:
    workload = _copy("behind", STORM, {"enable_prefix_caching": True}, tmp_path)
    env = {"STEPSCOPE_TRACE_SEGMENT": "1000000steps", "STEPSCOPE_TRACE_CHECKPOINT": "off"}
    harness = str(TESTS / "vllm_harness.py")
    result = vllm.run([harness, "behind", str(tmp_path), str(workload), "6", "1"], env=env)
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert outcome["complete"] and outcome["dropped"] > 0
    folder = tmp_path / workload.stem
    segments = scan(folder)
    assert len(segments) > 1
    assert "the recorder fell" in result.stderr and "recording resumes at step" in result.stderr
    with open_trace(folder) as trace:
        assert trace.meta["dropped_steps"] == str(outcome["dropped"])
    for segment in segments[1:]:
        replayed = vllm.stepscope("replay", str(folder), "--from-step", str(segment.first_step))
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr


@pytest.mark.parametrize(
    ("segment", "checkpoint"), [("0.000001s", "off"), ("5steps", "3steps"), ("5steps", "0.000001s")]
)
def test_every_segment_and_checkpoint_due_is_taken(
    vllm: VllmPython, tmp_path: Path, segment: str, checkpoint: str
) -> None:
    """Most iterations look no further than the next step or time something is due; every
    segment and checkpoint that is due is still taken, by steps or by seconds, both kinds
    together (a segment due every microsecond opens at every step but the first two)."""
    workload = _copy("due", TESTS / "conformance" / "33_aborts_lifecycle.json", {}, tmp_path)
    env = {"STEPSCOPE_TRACE_SEGMENT": segment, "STEPSCOPE_TRACE_CHECKPOINT": checkpoint}
    vllm.record(tmp_path, [workload], {}, env=env)
    folder = tmp_path / workload.stem
    with open_trace(folder) as trace:
        num_steps, taken = trace.num_steps, checkpoint_steps(trace)
    opened = [s.first_step for s in scan(folder)]
    if segment == "5steps":
        assert opened == list(range(0, num_steps, 5))
    else:  # the first segment's clock starts at step 1, its first look
        assert opened == [0, *range(2, num_steps)]
    if checkpoint == "3steps":
        assert taken == sorted({*range(3, num_steps, 3), *opened[1:]})
    elif checkpoint != "off":
        assert taken == list(range(1, num_steps))
    assert_checkpoints_hold(folder)
