"""The diff of two traces, step by step, and the classification of the first divergence.

Steps are aligned by number. A step's *decision* is what the scheduler chose: the
scheduled (request, tokens, kind) in order, the preempted ids and the free KV blocks
after `schedule()`. Its *inputs* are the arrivals, rejections and aborts applied
before it, and the tokens the model sampled. The first divergent step is classed
*input* when inputs differed at or before it, or sampled tokens differed at an
earlier step (same batch, other tokens: e.g. GPU numerics); otherwise *decision*
(same inputs, another choice). Each trace is reduced to per-step hashes in its own
read-only connection and the hashes are compared in an in-memory DuckDB, so no file
is attached. This is the TUI's own diff, kept here to be swapped for
`stepscope.replay`'s diff API.
"""

from __future__ import annotations

import array
import bisect
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from .models import Rows
from .queries import query
from .trace_source import TraceSource

_LOCKED: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "lock_configuration": True,
}


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
    """Compare two traces' decisions at every step and classify the first divergence."""
    hashes_a, hashes_b = a.step_hashes(), b.step_hashes()
    with duckdb.connect(":memory:", config=_LOCKED) as con:
        con.register("a", hashes_a)
        con.register("b", hashes_b)
        rows = con.execute(query("diff_steps")).fetchall()
    return classify(rows, hashes_a.num_rows, hashes_b.num_rows)


def classify(rows: list[tuple[Any, ...]], num_steps_a: int, num_steps_b: int) -> TraceDiff:
    """A TraceDiff from `diff_steps.sql` rows (step, missing, decision, inputs, sampled)."""
    divergent = array.array("q", (row[0] for row in rows if row[2]))
    first = divergent[0] if divergent else None
    input_step = next(
        (
            (step, "arrivals/aborts" if inputs else "sampled tokens")
            for step, missing, _, inputs, sampled in rows
            if not missing
            and (first is None or step <= first)
            and (inputs or (sampled and (first is None or step < first)))
        ),
        None,
    )
    if first is None:
        reason = f"inputs differ from step {input_step[0]:,}" if input_step else ""
        return TraceDiff(num_steps_a, num_steps_b, divergent, None, None, reason)
    if input_step is not None:
        step, what = input_step
        where = "at that step" if step == first else f"at step {step:,}, before it"
        return TraceDiff(
            num_steps_a,
            num_steps_b,
            divergent,
            first,
            DivergenceKind.INPUT,
            f"{what} differ {where}",
        )
    missing = next(row[1] for row in rows if row[0] == first)
    reason = (
        "one trace ends there; same inputs until then"
        if missing
        else "same inputs, a different choice"
    )
    return TraceDiff(num_steps_a, num_steps_b, divergent, first, DivergenceKind.DECISION, reason)
