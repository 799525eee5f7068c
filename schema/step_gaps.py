"""The steps a trace does not hold between two it does: a recording's writer fell behind.

A recording whose writer could not keep up drops steps, ends its segment (`fell_behind`)
and resumes at the next checkpoint, which opens the next segment; each run of steps
between two it holds is a gap. A replay starts again after one, from that checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

from .reader import TraceReader
from .recording_tables import Recording
from .sql_files import query

FELL_BEHIND = "the recorder fell behind and dropped them"
"""Why steps are missing when the recorder said it dropped them."""


@dataclass(frozen=True)
class StepGap:
    """Steps `first_step` to `last_step` (both included), missing from the trace."""

    first_step: int
    last_step: int
    fell_behind: bool
    """The recorder said it dropped them (its writer fell behind); else they are missing
    without a word (a segment deleted by hand)."""

    @property
    def why(self) -> str:
        return FELL_BEHIND if self.fell_behind else "not in the recording"

    def describe(self) -> str:
        """E.g. `steps 120..139 were not recorded (the recorder fell behind and dropped them)`."""
        if self.first_step == self.last_step:
            return f"step {self.first_step} was not recorded ({self.why})"
        return f"steps {self.first_step}..{self.last_step} were not recorded ({self.why})"


def step_gaps(trace: TraceReader, recording: Recording | None) -> tuple[StepGap, ...]:
    """Every gap of the one trace `trace` reads (a recording's reason read from the
    segment before it)."""
    fell_behind = set()
    if recording is not None:
        fell_behind = {segment.last_step for segment in recording.segments if segment.fell_behind}
    rows = trace.execute(query(__package__, "step_gaps")).fetchall()
    return tuple(StepGap(first, last, fell_behind=first - 1 in fell_behind) for first, last in rows)
