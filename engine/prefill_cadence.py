"""vLLM 0.33's local prefill cadence (`prefill_schedule_interval`): prefill held between releases.

While a decode runs, a step carries prefill (an admission with prompt left, or a running
chunk) only once `local_prefill_interval` executed steps have passed since the last one
that did, so decodes run in longer uninterrupted stretches. The capacity escape: a release
step that leaves requests waiting (beyond those skipped) sets `prefill_capacity_bound`,
and no step is held until a release drains the queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .request import Request


@dataclass(slots=True)
class PrefillCadence:
    """The scheduler's cadence counters, named as vLLM's."""

    local_prefill_interval: int
    num_executed_steps: int = 0
    """`schedule()` calls that scheduled any token (idle and empty ones do not count)."""
    last_prefill_step: int = 0
    """The executed-step number of the last step that carried prefill."""
    prefill_capacity_bound: bool = False
    """The last release could not drain the waiting queue: nothing is held."""

    def __post_init__(self) -> None:
        # A full interval back, so the first step is never held.
        self.last_prefill_step = -self.local_prefill_interval

    def defer_prefills(self, running: Iterable[Request]) -> bool:
        """Whether this step holds prefill: inside the interval, no backlog, a decode running.

        The step becomes executed step `num_executed_steps + 1` if it schedules anything.
        """
        return (
            self.local_prefill_interval > 1
            and not self.prefill_capacity_bound
            and (self.num_executed_steps + 1) - self.last_prefill_step < self.local_prefill_interval
            and any(not request.is_prefill_chunk for request in running)
        )

    def after_waiting_pass(self, num_waiting: int, num_deferred_waiting: int) -> None:
        """On a step not held that reached the waiting pass: is a backlog left?"""
        self.prefill_capacity_bound = num_waiting > num_deferred_waiting

    def after_schedule(self, num_scheduled_tokens: int, *, carried_prefill: bool) -> None:
        """Count the step if it scheduled anything, then restart the interval if it prefilled."""
        if num_scheduled_tokens > 0:
            self.num_executed_steps += 1
        if self.local_prefill_interval > 1 and carried_prefill:
            self.last_prefill_step = self.num_executed_steps

    def fields(self) -> dict[str, int | bool]:
        """The oracle's `prefill_cadence` field."""
        return {
            "executed_steps": self.num_executed_steps,
            "last_prefill_step": self.last_prefill_step,
            "capacity_bound": self.prefill_capacity_bound,
        }
