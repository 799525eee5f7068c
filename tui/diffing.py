"""The diff of two traces, step by step, and the classification of the first divergence.

Steps are aligned by number. A step's *decision* is what the scheduler chose: the
scheduled (request, tokens, kind) in order, the preempted ids and the free KV blocks
after `schedule()`. Its *inputs* are the arrivals, rejections and aborts applied
before it, and the tokens the model sampled. The first divergent step is classed
*input* when inputs differed at or before it, or sampled tokens differed at an
earlier step (same batch, other tokens: e.g. GPU numerics); otherwise *decision*
(same inputs, another choice). Which steps differ, and why the first does, come from
`stepscope.replay`'s diff, so the TUI and `stepscope diff` always agree; the per-step
decisions here are what the side-by-side view shows.
"""

from __future__ import annotations

import array
import bisect
import enum
from collections.abc import Sequence
from dataclasses import dataclass

from stepscope.replay.diff import Classification, compare_steps

from .models import Rows
from .trace_source import TraceSource


class DivergenceKind(enum.StrEnum):
    INPUT = "input"
    DECISION = "decision"


@dataclass(frozen=True)
class StepDecision:
    """What the scheduler decided at one step, and the inputs it saw."""

    step: int
    idle: bool
    scheduled: tuple[tuple[str, int, str], ...]
    """(request id, tokens, kind) in the SchedulerOutput's order."""
    preempted: tuple[str, ...]
    """Preempted request ids, sorted."""
    num_free_blocks_after_schedule: int | None
    inputs: tuple[str, ...] = ()
    """'arrive r1', 'abort r2', … sorted."""
    sampled: tuple[tuple[str, int | None], ...] = ()
    """(request id, sampled token or None) in the SchedulerOutput's order."""
    block_ids: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """(request id, block ids in the output), by request id: a running request's new
    blocks, an admission's whole table."""
    update_step: int | None = None
    """The step whose update processed this step's output (async: the next one)."""


def differences(a: StepDecision | None, b: StepDecision | None) -> tuple[str, ...]:
    """The parts of a step's decision that differ between two sides."""
    if a is None or b is None:
        return () if a is b else ("missing",)
    found = []
    if a.idle != b.idle:
        found.append("idle")
    if a.scheduled != b.scheduled:
        found.append("scheduled")
    if a.preempted != b.preempted:
        found.append("preempted")
    if a.num_free_blocks_after_schedule != b.num_free_blocks_after_schedule:
        found.append("free blocks")
    if a.block_ids != b.block_ids:
        found.append("block ids")
    if a.update_step != b.update_step:
        found.append("update step")
    return tuple(found)


def input_differences(a: StepDecision | None, b: StepDecision | None) -> tuple[str, ...]:
    """The inputs of a step that differ between two sides: arrivals/aborts, sampled tokens."""
    if a is None or b is None:
        return ()
    found = []
    if a.inputs != b.inputs:
        found.append("arrivals/aborts")
    if a.sampled != b.sampled:
        found.append("sampled tokens")
    return tuple(found)


def decisions_from_rows(rows: Rows) -> list[StepDecision]:
    """StepDecisions from `step_decisions.sql` rows."""
    return [
        StepDecision(
            step=int(row["step"]),
            idle=bool(row["idle"]),
            scheduled=tuple(
                (item["request_id"], int(item["num_tokens"]), item["kind"])
                for item in row["scheduled"]
            ),
            preempted=tuple(row["preempted"]),
            num_free_blocks_after_schedule=row["num_free_blocks_after_schedule"],
            inputs=tuple(row["inputs"]),
            sampled=tuple((item["request_id"], item["token_id"]) for item in row["sampled"]),
            block_ids=tuple(
                (item["request_id"], tuple(item["block_ids"])) for item in row["block_ids"]
            ),
            update_step=row["update_step"],
        )
        for row in rows.dicts()
    ]


def step_decisions(source: TraceSource, first: int, last: int) -> dict[int, StepDecision]:
    """The recorded decisions of steps first..last, by step."""
    return {d.step: d for d in decisions_from_rows(source.rows("step_decisions", [first, last]))}


@dataclass(frozen=True)
class TraceDiff:
    """Two traces compared step by step."""

    num_steps_a: int
    num_steps_b: int
    divergent_steps: Sequence[int]
    """Steps whose decisions differ (or that one side lacks), ascending."""
    first_divergence: int | None
    kind: DivergenceKind | None
    reason: str
    """Why the first divergence got its class, in one sentence."""

    def next_divergence(self, step: int, forward: bool) -> int | None:
        steps = self.divergent_steps
        if forward:
            index = bisect.bisect_right(steps, step)
            return steps[index] if index < len(steps) else None
        index = bisect.bisect_left(steps, step) - 1
        return steps[index] if index >= 0 else None

    def is_divergent(self, step: int) -> bool:
        index = bisect.bisect_left(self.divergent_steps, step)
        return index < len(self.divergent_steps) and self.divergent_steps[index] == step

    @property
    def summary(self) -> str:
        if self.first_divergence is None:
            same = "same decisions at every step"
            return same + (f"; {self.reason}" if self.reason else "")
        return (
            f"{len(self.divergent_steps):,} divergent steps; first at step "
            f"{self.first_divergence:,}: {self.kind} divergence ({self.reason})"
        )


def diff_traces(a: TraceSource, b: TraceSource) -> TraceDiff:
    """Compare two traces' decisions at every step, as `stepscope diff` does."""
    with a.lock, b.lock:
        steps = compare_steps(a.trace, b.trace)
    divergent = array.array("q", steps.divergent_steps)
    first = steps.first_decision_step
    if steps.classification is Classification.INPUT:
        reason = f"{steps.input_cause} differed first, at step {steps.first_input_step:,}"
        return TraceDiff(
            steps.num_steps[0], steps.num_steps[1], divergent, first, DivergenceKind.INPUT, reason
        )
    if first is not None:
        reason = (
            "one trace ends there; same inputs until then"
            if "missing_step" in steps.decision_fields
            else "same inputs, a different choice"
        )
        return TraceDiff(
            steps.num_steps[0],
            steps.num_steps[1],
            divergent,
            first,
            DivergenceKind.DECISION,
            reason,
        )
    reason = ""
    if steps.first_input_step is not None:
        reason = f"inputs differ from step {steps.first_input_step:,} ({steps.input_cause})"
    return TraceDiff(steps.num_steps[0], steps.num_steps[1], divergent, None, None, reason)
