"""Starting a replay at any step: from the nearest checkpoint at or before it, silently to it.

The state at step S is the trace's checkpoint at C ≤ S, run on to S through the engine
under the recorded config, with nothing recorded. A what-if then goes on from S under
its knobs, so a what-if from S is a what-if from step 0 whose knobs take effect at S.
The model runner takes up the run at C: its view of each request is the checkpoint's;
with speculative decoding the recording's verdicts are read from C on, and the last
drafts the runner proposed before C (and how many a scripted drafter verified) from the
rows before it. Only the rows a run from C needs are read, so the cost of starting does
not grow with the steps before C.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stepscope.engine import EngineLoop, InputError, TapeModelRunner, Workload
from stepscope.engine.checkpoint import SchedulerCheckpoint, take_checkpoint
from stepscope.engine.restore import check_checkpoint, check_hashes_computable, check_knobs
from stepscope.schema import StepGap, Trace

# The window is the schema's (a reader reads one too); replay's modules name it from here.
from stepscope.schema.step_window import WHOLE as WHOLE
from stepscope.schema.step_window import StepWindow as StepWindow

from .checkpoints import checkpoint_steps, nearest_checkpoint, read_checkpoint
from .inputs import recorded_config, request_indices, workload_from_trace
from .sql import query
from .stored_alike import ALL_STEPS
from .trace_runner import RecordedDrafter, replay_model_runner, whatif_model_runner


def window_bounds(window: StepWindow) -> tuple[int, int]:
    """The window's first and last step, as SQL's BETWEEN takes them."""
    return window.from_step, ALL_STEPS if window.to_step is None else window.to_step


def check_window(window: StepWindow, trace: Trace) -> None:
    """A window the trace can be replayed over, or a one-line error naming the bound: a
    start past the trace's steps, before them (a recording whose oldest segments were
    deleted), or in a gap (steps the recorder dropped)."""
    first, last = trace.first_step, trace.last_step
    start = window.from_step
    if start < 0:
        raise InputError(f"--from-step {start}: a step is 0 or more")
    if start > last or (start and start < first):
        raise InputError(f"--from-step {start}: {trace.path} has steps {first}..{last}")
    for gap in trace.gaps:
        if gap.first_step <= start <= gap.last_step:
            raise InputError(
                f"--from-step {start}: {trace.path} did not record steps "
                f"{gap.first_step}..{gap.last_step} ({gap.why}); "
                f"the next recorded step is {gap.last_step + 1}"
            )
    if window.to_step is not None and window.to_step < start:
        raise InputError(f"--to-step {window.to_step}: it is before --from-step {start}")


def within_trace(window: StepWindow, trace: Trace) -> StepWindow:
    """`window` starting no earlier than the trace's first step (a recording whose oldest
    segments were deleted starts later than step 0, with a checkpoint); the trace's keys
    are checked first (`Trace.check_keys`): a replay finds its steps by them."""
    trace.check_keys()
    if window.from_step >= trace.first_step:
        return window
    return StepWindow(trace.first_step, window.to_step)


def recorded_stretches(window: StepWindow, trace: Trace) -> tuple[StepWindow, ...]:
    """`window` cut at the trace's gaps: the stretches of steps it holds, each after the
    first starting at the checkpoint that resumed recording."""
    window = within_trace(window, trace)
    stretches = []
    start = window.from_step
    for gap in trace.gaps:
        if gap.last_step < start:
            continue
        if window.to_step is not None and gap.first_step > window.to_step:
            break
        stretches.append(StepWindow(start, gap.first_step - 1))
        start = gap.last_step + 1
    stretches.append(StepWindow(start, window.to_step))
    return tuple(stretches)


def one_stretch(window: StepWindow, trace: Trace) -> StepWindow:
    """`window` from the trace's first step, when it spans no gap: a what-if runs one
    course, which cannot cross steps the trace does not hold."""
    stretches = recorded_stretches(window, trace)
    if len(stretches) > 1:
        listed = ", ".join(
            f"{s.from_step}..{trace.last_step if s.to_step is None else s.to_step}"
            for s in stretches
        )
        raise InputError(
            f"{trace.path}: {gaps_within(window, trace)[0].describe()}, and a what-if runs "
            f"one course; give --from-step/--to-step within one recorded stretch ({listed})"
        )
    return stretches[0]


def gaps_within(window: StepWindow, trace: Trace) -> tuple[StepGap, ...]:
    """The trace's gaps that `window` spans."""
    low, high = window_bounds(window)
    return tuple(gap for gap in trace.gaps if gap.last_step >= low and gap.first_step <= high)


@dataclass(frozen=True)
class Start:
    """Where a windowed replay starts: the state at its first step, and how it was reached."""

    state: SchedulerCheckpoint
    checkpoint_step: int
    """The trace's checkpoint it was run on from (0: from step 0, whose state is empty)."""
    workload: Workload
    """The workload from there on: the requests unfinished at the start, then those
    arriving at or after it (numbered in that order in the replay's trace)."""
    runner: TapeModelRunner
    """The model runner, taken up at the start."""


class _Reached(Exception):
    """Raised at the start of the step a silent run is to stop at."""

    def __init__(self, state: SchedulerCheckpoint) -> None:
        self.state = state


def start_at(
    trace: Trace, step: int, knobs: Mapping[str, Any] | None = None, until: int = ALL_STEPS
) -> Start:
    """The state at the start of `step`, from the trace's nearest checkpoint at or before
    it, with the workload and the model runner (taken up there) to go on with; under a
    what-if's `knobs`, which the state must be able to take (`check_knobs`), though the
    run to `step` follows the recording. Only the rows from that checkpoint on are read,
    and for an exact replay that stops at step `until`, none past it (a what-if's tapes
    are whole: its run may sample a request's later tokens sooner)."""
    steps = require_checkpoints(trace)
    checkpoint_step = nearest_checkpoint(steps, step)  # None: step 0, whose state is empty
    _check_resumable(trace, step, checkpoint_step)
    checkpoint = None if checkpoint_step is None else read_checkpoint(trace, checkpoint_step)
    workload = workload_from_trace(
        trace, knobs, since=checkpoint, until=ALL_STEPS if knobs else until
    )
    first_step = checkpoint_step or 0
    runner = (
        whatif_model_runner(workload, trace, knobs, first_step)
        if knobs
        else replay_model_runner(workload, trace, first_step)
    )
    recorded = workload_as_recorded(trace, workload, knobs)
    check_knobs(recorded.config, workload.config)
    if checkpoint is not None:
        check_hashes_computable(recorded.config)
        recorded = from_checkpoint_on(recorded, checkpoint)
        resume_runner(runner, trace, recorded, checkpoint)
    state = run_silently(recorded, runner, checkpoint, step)
    workload = from_checkpoint_on(workload, state)
    check_checkpoint(state, workload.config, {spec.request_id: spec for spec in workload.requests})
    return Start(state, first_step, workload, runner)


def _check_resumable(trace: Trace, step: int, checkpoint_step: int | None) -> None:
    """A checkpoint between `step` and the trace's first step or gap before it: a run
    from any earlier one would cross steps the trace does not hold."""
    resumed = max([trace.first_step, *(g.last_step + 1 for g in trace.gaps if g.last_step < step)])
    if resumed and (checkpoint_step is None or checkpoint_step < resumed):
        raise InputError(
            f"{trace.path}: no checkpoint at steps {resumed}..{step}, the recorded steps "
            f"before {step} since its {'gap' if resumed > trace.first_step else 'first step'}; "
            "a replay cannot start there (a redacted recording's segments open without one)"
        )


def from_checkpoint_on(workload: Workload, checkpoint: SchedulerCheckpoint) -> Workload:
    """The workload's requests a run from `checkpoint` has: its unfinished ones, then
    those arriving at or after its step."""
    specs = {spec.request_id: spec for spec in workload.requests}
    unfinished = [specs[rc.request_id] for rc in checkpoint.requests if rc.request_id in specs]
    later = sorted(
        (spec for spec in workload.requests if spec.arrival_step >= checkpoint.step),
        key=lambda spec: spec.arrival_step,
    )  # numbered in arrival order, so a replay stopped early has requests 0..n-1
    return dataclasses.replace(workload, requests=(*unfinished, *later))


def workload_as_recorded(
    trace: Trace, workload: Workload, knobs: Mapping[str, object] | None
) -> Workload:
    """`workload` under the trace's own config (a what-if's knobs taken off)."""
    return workload.with_config(recorded_config(trace)) if knobs else workload


def run_silently(
    workload: Workload, runner: TapeModelRunner, checkpoint: SchedulerCheckpoint | None, step: int
) -> SchedulerCheckpoint:
    """The state at the start of `step`, run on from `checkpoint` (None: from step 0) with
    nothing recorded."""
    if checkpoint is not None and checkpoint.step == step:
        return checkpoint
    loop = EngineLoop(workload, runner, keep_finishes=False)
    if checkpoint is not None:
        loop.resume(checkpoint)

    def stop_at(at: int) -> None:
        if at == step:
            pending = loop.batch_steps[0] if loop.batch_steps else None
            raise _Reached(take_checkpoint(loop.core, at, pending))

    loop.on_step_start = stop_at
    steps = loop.run()
    try:
        for _ in steps:
            pass
    except _Reached as reached:
        return reached.state
    finally:
        steps.close()
    raise InputError(
        f"{workload.source}: the replay from step {checkpoint.step if checkpoint else 0} ended "
        f"before step {step}; replay from there to see where it departs"
    )


def require_checkpoints(trace: Trace) -> list[int]:
    """The trace's checkpoint steps; none is a one-line error saying why and what to do."""
    steps = checkpoint_steps(trace)
    if not steps:
        raise InputError(_no_checkpoints(trace))
    return steps


def _no_checkpoints(trace: Trace) -> str:
    if trace.schema_version < 6:
        why = "it was recorded before checkpoints existed (schema < 6)"
    elif trace.config.get("kv_cache_groups") is not None and trace.schema_version < 12:
        why = "a run with hybrid KV cache groups took none before schema 12"
    else:
        why = "it was recorded with --checkpoint-every 0, redacted, or ran too few steps"
    return f"{trace.path}: no checkpoints ({why}); replay it from step 0, without --from-step"


def resume_runner(
    runner: TapeModelRunner, trace: Trace, workload: Workload, checkpoint: SchedulerCheckpoint
) -> None:
    """Take the runner up at `checkpoint`: its requests, and its drafter's place (the
    runner's verdicts, read from the checkpoint's step on, start there already)."""
    specs = {spec.request_id: spec for spec in workload.requests}
    drafter = runner.drafter
    if drafter is None:
        runner.resume(checkpoint, specs)
        return
    done = _drafts_done(trace, checkpoint)
    batch = checkpoint.pending_batch
    in_flight = dict(batch.sampled_token_ids) if batch is not None else {}
    latest = {}
    for rc in checkpoint.requests:
        row = done.get(rc.request_id)
        if row is None:
            continue
        _, _, proposed, sample_step, admit_step = row
        if sample_step is not None and (admit_step is None or sample_step >= admit_step):
            base = len(rc.output_token_ids) + len(in_flight.get(rc.request_id, ()))
            latest[rc.request_id] = (base, tuple(proposed or ()))
    runner.resume(checkpoint, specs, latest)
    if not isinstance(drafter, RecordedDrafter):  # its verdicts are read from the checkpoint on
        for request_id, (_, num_verified, *_) in done.items():
            if num_verified:
                drafter.num_verifications[request_id] = num_verified


def _drafts_done(trace: Trace, checkpoint: SchedulerCheckpoint) -> dict[str, tuple[Any, ...]]:
    """`resume_drafts.sql`'s row of each request in the checkpoint, by id."""
    by_id = request_indices(trace, [rc.request_id for rc in checkpoint.requests])
    wanted = [by_id[rc.request_id] for rc in checkpoint.requests]
    rows = trace.sql(query("resume_drafts"), [checkpoint.step, wanted]).fetchall()
    return {row[0]: row[1:] for row in rows}
