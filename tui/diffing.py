"""The TUI's diff of two traces: `stepscope diff`'s step comparison, computed in a worker.

Which steps diverge, why the first does, whether the configs differ, and which decision
fields differ at each step all come from `stepscope.replay.diff.compare_steps`, and the
steps compared from `stepscope.replay.diff_window`, so the TUI and `stepscope diff` agree
by construction.
"""

from __future__ import annotations

from stepscope.replay.diff import StepComparison, compare_steps
from stepscope.replay.diff_window import within_both
from stepscope.replay.from_step import WHOLE, StepWindow
from stepscope.schema import Trace

from .trace_source import TraceSource


def diff_window(
    a: TraceSource, b: TraceSource, window: StepWindow = WHOLE
) -> tuple[StepWindow, str | None]:
    """The steps to compare, as `stepscope diff` chooses them: `window` (the steps both
    sources read), from the later of the two first steps unless it starts past step 0 (a
    line saying so; None when both start there). Two traces that hold no step in common
    are an InputError."""
    from_step_given = window.from_step > 0
    return a.read(
        lambda trace_a: b.read(
            lambda trace_b: within_both(trace_a, trace_b, window, from_step_given=from_step_given)
        )
    )


def diff_traces(
    a: TraceSource,
    b: TraceSource,
    *,
    ignore_block_ids: bool = False,
    window: StepWindow = WHOLE,
) -> StepComparison:
    """Compare two traces' decisions at every step of `window`, as `stepscope diff` does."""

    def compare(trace_a: Trace, trace_b: Trace) -> StepComparison:
        return compare_steps(trace_a, trace_b, ignore_block_ids=ignore_block_ids, window=window)

    return a.read(lambda trace_a: b.read(lambda trace_b: compare(trace_a, trace_b)))
