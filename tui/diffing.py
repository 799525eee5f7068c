"""The TUI's diff of two traces: `stepscope diff`'s step comparison, and steps' decisions.

Which steps diverge, why the first does, and whether the configs differ come from
`stepscope.replay.diff.compare_steps`, and a step's decision and what differs in
it from `stepscope.replay.step_decision`, so the TUI and `stepscope diff` always agree;
the decisions are what the side-by-side and replay views show.
"""

from __future__ import annotations

import weakref

from stepscope.replay.diff import StepComparison, compare_steps
from stepscope.replay.step_decision import RecordedDecisions, StepDecision, differences

from .trace_source import TraceSource

_READERS: weakref.WeakKeyDictionary[TraceSource, RecordedDecisions] = weakref.WeakKeyDictionary()
"""Each open trace's decision reader (it keeps the trace's request ids once read)."""


def step_decisions(source: TraceSource, first: int, last: int) -> dict[int, StepDecision]:
    """The recorded decisions of steps first..last, by step."""
    with source.lock:
        reader = _READERS.get(source)
        if reader is None:
            reader = _READERS[source] = RecordedDecisions(source.trace)
        return {decision.step: decision for decision in reader.between(first, last)}


def step_differences(
    a: TraceSource, b: TraceSource, step: int, *, ignore_block_ids: bool = False
) -> tuple[str, ...]:
    """The parts of `step`'s decision that differ between two traces (`missing_step`: one
    lacks it)."""
    mine, theirs = step_decisions(a, step, step), step_decisions(b, step, step)
    return differences(mine.get(step), theirs.get(step), ignore_block_ids=ignore_block_ids)


def diff_traces(
    a: TraceSource, b: TraceSource, *, ignore_block_ids: bool = False
) -> StepComparison:
    """Compare two traces' decisions at every step, as `stepscope diff` does."""
    with a.lock, b.lock:
        return compare_steps(a.trace, b.trace, ignore_block_ids=ignore_block_ids)
