"""The steps a diff compares: those both traces can hold.

A trace can start past step 0 (a recording whose oldest segments retention deleted, a
replay's from a step), so the steps one of them never held are not differences: `stepscope
diff` and the TUI's diff both start at the later of the two first steps, unless told where.
"""

from __future__ import annotations

from stepscope.engine import InputError
from stepscope.schema import Trace

from .from_step import StepWindow


def within_both(
    a: Trace, b: Trace, window: StepWindow, *, from_step_given: bool
) -> tuple[StepWindow, str | None]:
    """`window` within the steps both traces can hold. Without `--from-step` it starts at
    the later of their first steps, with a line saying so (None: both start at 0). A
    `--from-step` or `--to-step` before that step, or two traces that hold no step in
    common (a snapshot taken before retention deleted every step it holds from the
    recording), is an error naming what each holds."""
    if _both_hold_steps(a, b) and max(a.first_step, b.first_step) > min(a.last_step, b.last_step):
        raise InputError(
            f"{a.path} holds steps {a.first_step}..{a.last_step} and {b.path} steps "
            f"{b.first_step}..{b.last_step}: no step is in both, so there is nothing to compare"
        )
    later = b if b.first_step > a.first_step else a
    first, last = later.first_step, later.last_step
    for option, step in (("--from-step", window.from_step if from_step_given else None),
                         ("--to-step", window.to_step)):  # fmt: skip
        if step is not None and step < first:
            raise InputError(f"{option} {step}: {later.path} holds steps {first}..{last}")
    if from_step_given or first == 0:
        return window, None
    note = f"{later.path} holds steps from {first}: compared from step {first}"
    return StepWindow(first, window.to_step), note


def _both_hold_steps(a: Trace, b: Trace) -> bool:
    return a.first_step <= a.last_step and b.first_step <= b.last_step
