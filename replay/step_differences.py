"""Which fields of which steps differ between two traces: the one per-step comparison.

Each step's decision and inputs are fingerprinted in SQL (`step_fingerprints`); two
traces' fingerprints are compared step by step, and each step gets the names of the
fields whose fingerprints differ (`missing_step` when one trace lacks it). `stepscope
diff`, exact replay and the TUI all read this comparison.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from stepscope.schema import Trace

from .on_both import on_both
from .step_fingerprints import step_fingerprints
from .stored_alike import ALL_STEPS, StoredRows, stored_alike, stored_rows

DECISION_FIELDS = ("idle", "update_step", "num_free_blocks", "scheduled", "preempted", "block_ids")
"""The parts of a step's decision that can differ, in the order they are named."""

SAMPLED = "sampled"
"""What the model sampled at a step: an input of the next step, not a decision."""

MISSING_STEP = "missing_step"
"""What differs at a step one trace lacks."""

_FINGERPRINTS = {
    "idle": "idle",
    "update_step": "update_step",
    "num_free_blocks": "num_free_blocks",
    "scheduled": "decision",
    "preempted": "preempted",
    "block_ids": "blocks",
    SAMPLED: "sampled",
}
"""The `step_fingerprints` column of each field."""


@dataclass(frozen=True)
class StepDifferences:
    """Every step where a compared field differs or one trace lacks it, and what differs."""

    steps: list[int]
    """Ascending."""
    fields: list[tuple[str, ...]]
    """Each of `steps`' differing fields, in the order compared (`missing_step` alone)."""

    def first(self) -> tuple[int | None, tuple[str, ...]]:
        """The first differing step and its fields (None, () when none differs)."""
        return (self.steps[0], self.fields[0]) if self.steps else (None, ())

    def at(self, step: int) -> tuple[str, ...]:
        """The fields that differ at `step` (() when none does)."""
        index = bisect.bisect_left(self.steps, step)
        found = index < len(self.steps) and self.steps[index] == step
        return self.fields[index] if found else ()


def fingerprints(
    a: Trace, b: Trace, steps: tuple[int, int] = (0, ALL_STEPS)
) -> tuple[pa.Table, pa.Table]:
    """Both traces' fingerprints of the steps `steps` (first, last); the leading steps
    stored alike in both are not hashed (their fingerprints are 0 on both sides)."""
    rows = on_both(lambda trace: checked_rows(trace, steps), a, b)
    start = max(stored_alike(*rows), steps[0])
    by_trace = {id(a): rows[0], id(b): rows[1]}
    return on_both(
        lambda trace: step_fingerprints(trace, by_trace[id(trace)], start, steps[1]), a, b
    )


def checked_rows(trace: Trace, steps: tuple[int, int] = (0, ALL_STEPS)) -> StoredRows:
    """The rows of the steps `steps` a trace's fingerprints are made of (its keys checked
    first: the rows are read by them)."""
    trace.check_keys()
    return stored_rows(trace, steps)


def step_differences(a: pa.Table, b: pa.Table, names: Sequence[str]) -> StepDifferences:
    """The steps of fingerprints `a` and `b` (each by step) where any of the fields `names`
    differ, and the steps one side lacks (a trace may start later, or have gaps)."""
    steps_a, steps_b = a["step"].to_numpy(), b["step"].to_numpy()
    both = np.intersect1d(steps_a, steps_b, assume_unique=True)
    rows_a, rows_b = np.searchsorted(steps_a, both), np.searchsorted(steps_b, both)
    masks = np.zeros(both.size, np.uint32)
    for bit, name in enumerate(names):
        column = _FINGERPRINTS[name]
        unequal = a[column].to_numpy()[rows_a] != b[column].to_numpy()[rows_b]
        masks |= unequal.astype(np.uint32) << np.uint32(bit)
    rows = np.flatnonzero(masks)
    found = masks[rows]
    named = {int(mask): _names(int(mask), names) for mask in np.unique(found)}
    steps, fields = both[rows].tolist(), [named[mask] for mask in found.tolist()]
    missing = np.setxor1d(steps_a, steps_b, assume_unique=True).tolist()
    if not missing:
        return StepDifferences(steps, fields)
    ordered = sorted([*zip(steps, fields, strict=True), *((m, (MISSING_STEP,)) for m in missing)])
    return StepDifferences([step for step, _ in ordered], [named for _, named in ordered])


def _names(mask: int, names: Sequence[str]) -> tuple[str, ...]:
    return tuple(name for bit, name in enumerate(names) if mask >> bit & 1)
