"""One step of a trace in full: what the scheduler decided there, read by one function.

The TUI's step detail and the diff's first divergent step both read a step through
`read_step`, so each shows the same rows in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .rows import Rows
from .sql_files import query
from .trace import Trace


@dataclass(frozen=True)
class StepDetail:
    """One step: its `steps` row, SchedulerOutput, allocations, preemptions, drafts and events."""

    step: int
    row: dict[str, Any] | None
    """The `steps` row (budgets, counts, free blocks, why each pass stopped); None when the
    trace has no such step."""
    scheduled: Rows
    """The SchedulerOutput in vLLM's order: request_id, kind, num_tokens, computed_before,
    computed_after, new_block_ids (KV cache group 0's), new_block_ids_by_group (hybrid groups:
    each group's as (kv_cache_group, block_ids); None with one group), sampled_token_id."""
    allocations: Rows
    """Every `allocate_slots` call in call order, granted or refused (the `allocations` view)."""
    preemptions: Rows
    """Every preemption: the victim, who needed room, what it cost and why (`why_preempted`)."""
    events: Rows
    """The lifecycle events in order: request_id, kind (arrive, skip, finish, ...), detail."""
    drafts: Rows
    """Speculative decoding's drafts per request in vLLM's order; none when it is off."""

    @property
    def in_trace(self) -> bool:
        return self.row is not None

    def request_ids(self, kind: str) -> list[str]:
        """Ids of the requests with an event of `kind` (finish, arrive, ...) at this step."""
        return [event["request_id"] for event in self.events.dicts() if event["kind"] == kind]

    def as_json(self) -> dict[str, Any]:
        """The step as plain values, each table a list of rows keyed by column name."""
        tables = ("scheduled", "allocations", "preemptions", "drafts", "events")
        return {
            "step": self.step,
            "row": self.row,
            **{name: list(getattr(self, name).dicts()) for name in tables},
        }


def read_step(trace: Trace, step: int) -> StepDetail:
    """Step `step` of `trace` in full (a step the trace lacks reads with no row and no rows)."""
    ((row, scheduled, allocations, events),) = trace.execute(
        query(__package__, "step_detail"), [step]
    ).fetchall()
    preempted = row is not None and bool(row["num_preemptions"])  # NULL on an idle step
    return StepDetail(
        step=step,
        row=row,
        scheduled=Rows.of_structs(scheduled),
        allocations=Rows.of_structs(allocations),
        preemptions=_rows(trace, "step_preemptions", step) if preempted else Rows.none(),
        events=Rows.of_structs(events),
        drafts=_rows(trace, "step_drafts", step) if _drafts_on(trace) else Rows.none(),
    )


def _rows(trace: Trace, name: str, step: int) -> Rows:
    return Rows.fetched(trace.execute(query(__package__, name), [step]))


def _drafts_on(trace: Trace) -> bool:
    """Whether the trace was recorded with speculative decoding on."""
    return bool(trace.config.get("num_speculative_tokens"))
