"""The checkpoint test: every checkpoint a trace holds equals the state stepscope's engine
reaches at its step, replaying the trace from step 0 (a failure names the field, the
request and the step)."""

from __future__ import annotations

from pathlib import Path

from stepscope.engine import EngineLoop
from stepscope.engine.checkpoint import SchedulerCheckpoint, checkpoint_differences, take_checkpoint
from stepscope.replay.checkpoints import checkpoint_steps, read_checkpoint
from stepscope.replay.inputs import workload_from_trace
from stepscope.replay.trace_runner import replay_model_runner
from stepscope.schema import open_trace


def reached_states(trace_path: Path, steps: set[int]) -> dict[int, SchedulerCheckpoint]:
    """The state stepscope's engine reaches at the start of each of `steps`, from step 0."""
    with open_trace(trace_path) as trace:
        workload = workload_from_trace(trace)
        loop = EngineLoop(workload, replay_model_runner(workload, trace), keep_finishes=False)
    reached = {}

    def take(step: int) -> None:
        if step in steps:
            pending = loop.batch_steps[0] if loop.batch_steps else None
            reached[step] = take_checkpoint(loop.core, step, pending)

    loop.on_step_start = take
    for _ in loop.run():
        pass
    return reached


def assert_checkpoints_hold(trace_path: Path) -> int:
    """Each checkpoint in the trace equals the state a replay from step 0 reaches there;
    returns how many there were."""
    with open_trace(trace_path) as trace:
        steps = checkpoint_steps(trace)
        held = {step: read_checkpoint(trace, step) for step in steps}
    reached = reached_states(trace_path, set(steps))
    assert reached.keys() == held.keys()  # a run of a step or two has none
    for step in steps:
        differences = checkpoint_differences(held[step], reached[step])
        assert not differences, "\n".join(differences)
    return len(steps)
