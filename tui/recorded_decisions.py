"""A trace's recorded step decisions, for the live replay to set beside the engine's."""

from __future__ import annotations

import weakref

from stepscope.replay.step_decision import RecordedDecisions, StepDecision

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
