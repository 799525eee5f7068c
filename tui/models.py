"""What the TUI's queries return: small frozen values that widgets render and messages carry."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Rows:
    """A query result: column names and rows of plain Python values."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def dicts(self) -> Iterator[dict[str, Any]]:
        for row in self.rows:
            yield dict(zip(self.columns, row, strict=True))

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class TraceInfo:
    """What the TUI needs to know about a trace before showing any step."""

    path: Path
    num_steps: int
    complete: bool
    meta: dict[str, str]
    config: dict[str, Any]

    @property
    def num_usable_blocks(self) -> int:
        return int(self.config.get("num_blocks") or 1) - 1

    @property
    def token_budget(self) -> int:
        config = self.config
        return int(
            config.get("max_num_scheduled_tokens") or config.get("max_num_batched_tokens") or 0
        )


@dataclass(frozen=True)
class StepDetail:
    """One step: its `steps` row, SchedulerOutput, allocations, preemptions and events."""

    step: int
    row: dict[str, Any] | None
    scheduled: Rows
    allocations: Rows
    preemptions: Rows
    events: Rows
    drafts: Rows = field(default_factory=lambda: Rows((), ()))
    """Speculative decoding's drafts per request (`step_drafts.sql`; none when it is off)."""

    def request_ids(self, kind: str) -> list[str]:
        """Ids of the requests with an event of `kind` (finish, arrive, ...) at this step."""
        return [event["request_id"] for event in self.events.dicts() if event["kind"] == kind]


@dataclass(frozen=True)
class PlotSeries:
    """The whole trace cut into buckets: mean budget use (0..1) and least free blocks per bucket."""

    num_steps: int
    budget_use: tuple[float, ...]
    num_free_blocks: tuple[int, ...]
    num_usable_blocks: int
    preempted: tuple[bool, ...]


@dataclass(frozen=True)
class LifeRow:
    """A step (or a run of decode steps) of a request's life."""

    first_step: int
    last_step: int
    what: str
    num_tokens: int | None
    computed_before: int | None
    computed_after: int | None
    blocks_held: int | None
    detail: str
    sampled: str


@dataclass(frozen=True)
class RequestLife:
    """A request's facts, its life step by step (decode runs folded), and why it waited."""

    request_id: str
    facts: dict[str, Any]
    life: tuple[LifeRow, ...]
    waiting: Rows


@dataclass(frozen=True)
class QueryResult:
    """A SQL console result: the first rows, and whether there were more."""

    query: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool
    elapsed_s: float = 0.0
    types: tuple[str, ...] = field(default=())
