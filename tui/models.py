"""What the TUI's queries return: small frozen values that widgets render and messages carry."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stepscope.schema import Rows


@dataclass(frozen=True)
class TraceInfo:
    """What the TUI needs to know about a trace before showing any step."""

    path: Path
    num_steps: int
    """Steps the trace holds."""
    complete: bool
    meta: dict[str, str]
    config: dict[str, Any]
    first_step: int = 0
    """The first step held (a recording whose oldest segments were deleted starts later)."""
    end_step: int | None = None
    """The step after the last one held (None: `num_steps`, the trace holding 0 on)."""
    gaps: tuple[str, ...] = ()
    """Each run of steps missing between two held, in words."""
    dropped_from: int | None = None
    """The first of the steps a recording lost at its end, its writer behind when it closed."""
    held: tuple[int, int] | None = None
    """The first and last step of the whole trace, when a window of it is read (None: the
    trace is read whole)."""

    @property
    def num_rows(self) -> int:
        """The timeline's rows: step 0 to the last step held, missing ones marked."""
        return self.num_steps if self.end_step is None else self.end_step

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


@dataclass(frozen=True)
class TailState:
    """What the screen shows of the recording: its steps, and whether it is still written."""

    first_step: int
    num_rows: int
    complete: bool
    writer: int | None
    """The process recording into it (None: none is)."""
    dropped_from: int | None = None
    """`TraceInfo.dropped_from`."""

    @classmethod
    def of(cls, info: TraceInfo, writer: int | None) -> TailState:
        return cls(info.first_step, info.num_rows, info.complete, writer, info.dropped_from)

    def describe(self, path: Path) -> str:
        """The screen's subtitle: the folder, how many steps, and whether it is recorded now."""
        if self.writer is not None:
            state = f"recording now (process {self.writer})"
        elif self.complete:
            state = "closed"
        elif self.dropped_from is not None:
            state = f"closed, the steps from {self.dropped_from:,} on dropped (it fell behind)"
        else:
            state = "not recorded now (the recorder stopped without closing it)"
        return f"following {path.name}: {self.num_rows:,} steps, {state}"
