"""The TUI's diff of two traces: `stepscope diff`'s step comparison, computed in a worker.

Which steps diverge, why the first does, whether the configs differ, and which decision
fields differ at each step all come from `stepscope.replay.diff.compare_steps`, so the
TUI and `stepscope diff` agree by construction.
"""

from __future__ import annotations

from stepscope.replay.diff import StepComparison, compare_steps
from stepscope.schema import Trace

from .trace_source import TraceSource


def diff_traces(
    a: TraceSource, b: TraceSource, *, ignore_block_ids: bool = False
) -> StepComparison:
    """Compare two traces' decisions at every step, as `stepscope diff` does."""

    def compare(trace_a: Trace, trace_b: Trace) -> StepComparison:
        return compare_steps(trace_a, trace_b, ignore_block_ids=ignore_block_ids)

    return a.read(lambda trace_a: b.read(lambda trace_b: compare(trace_a, trace_b)))
