"""The keep rule: a SQL condition over a segment's steps that spares it from retention.

    keep="num_preemptions > 0"      a closed segment with a step where it holds is kept
    keep_max=500MB                  kept segments take at most this (the oldest go past it)

The condition is a `StepCondition` over the columns each step stores (the `steps` view's,
less `blocked_request_id`, `num_draft_tokens` and `draft_slots`, which it joins from other
tables), typed as a reader types them and run in the reader's sandbox. It is checked once
when the recording starts (one line naming the setting when it does not parse or bind)
and evaluated on the writer's thread when a segment closes, never on the engine's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from stepscope.schema import TraceError
from stepscope.schema.step_condition import StepCondition, stored_step_rows


def check_keep_condition(condition: str, setting: str) -> str:
    """`condition`, stripped, once it is one SQL condition over a step's stored columns;
    else a ValueError naming `setting`."""
    if not condition.strip():
        raise ValueError(f"{setting}: empty; give a condition over a step's columns")
    try:
        StepCondition(condition, stored_step_rows(())).close()
    except TraceError as error:
        raise ValueError(f"{setting}={condition!r}: {error}") from None
    return condition.strip()


def segment_matches(condition: str, steps_files: Sequence[Path]) -> bool:
    """Whether `condition` holds at any step of the files (a segment's, or its parts');
    a TraceError when it fails on a value."""
    rows = stored_step_rows(steps_files)
    checked = StepCondition(condition, rows)
    try:
        return checked.first_step(rows) is not None
    finally:
        checked.close()
