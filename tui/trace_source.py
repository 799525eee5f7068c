"""A trace opened for the TUI: every query the screens need, returning plain values.

UI-free and thread-safe (one lock around the connection), so workers call it and
post what it returns; nothing here knows about Textual.

A recording folder a process still writes changes under a reader that stays open: its
writer merges the open segment's parts and deletes segments retention expires, a while
after it is done with them. A read that finds a file gone opens the folder again and reads
once more, so a screen left open on a live recording keeps reading it; what the screen
shows (`info`) stays what it was opened with, and a step deleted since reads as not held.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
from stepscope.schema import Rows, StepDetail, Trace, open_trace, read_step
from stepscope.schema.step_window import WHOLE, StepWindow
from stepscope.schema.trace_error import RecordingChangedError

from stepscope.safe_text import shown_id

from .models import LifeRow, PlotSeries, RequestLife, TraceInfo
from .queries import query

PAGE_SIZE = 128
"""Step rows per page of the timeline."""

DETAILS_KEPT = 64
"""Step details kept, so stepping back and forth does not query again."""

PLOT_BUCKETS = 1024
"""Points of the timeline plot; the widget resamples them to its width."""

MAX_MATCHES = 500
"""Request ids `/` offers to choose from when several match."""

T = TypeVar("T")


class TraceSource:
    """The TUI's read side of one trace."""

    def __init__(self, path: str | Path, window: StepWindow = WHOLE) -> None:
        self.path = Path(path)
        self.window = window
        """The steps read (`step_window`): the timeline shows those only."""
        self.trace: Trace = open_trace(self.path, window)
        self._lock = threading.RLock()
        self._details: OrderedDict[int, StepDetail] = OrderedDict()

    def close(self) -> None:
        with self._lock:
            self.trace.close()

    @property
    def lock(self) -> threading.RLock:
        """Held while `trace` is used from outside (one query at a time per connection)."""
        return self._lock

    def read(self, read: Callable[[Trace], T]) -> T:
        """`read(trace)` under the lock; when a recording's file went away while it ran, the
        recording is opened again and read once more."""
        with self._lock:
            try:
                return read(self.trace)
            except RecordingChangedError:
                self._reopen()
                return read(self.trace)

    def _reopen(self) -> None:
        """The trace opened again (the lock held): the recording as it stands now."""
        trace = open_trace(self.path, self.window)
        self.trace.close()
        self.trace = trace

    def rows(self, name: str, params: list[Any] | None = None) -> Rows:
        """Run `sql/<name>.sql` with positional parameters."""
        return self.read(lambda trace: Rows.fetched(trace.execute(query(name), params)))

    def arrow(self, name: str, params: list[Any] | None = None) -> pa.Table:
        return self.read(lambda trace: trace.arrow(query(name), params))

    def scalar(self, name: str, params: list[Any] | None = None) -> Any:
        result = self.rows(name, params).rows
        return result[0][0] if result else None

    @cached_property
    def info(self) -> TraceInfo:
        with self._lock:
            trace = self.trace
            num_steps, first, last = trace.num_steps, trace.first_step, trace.last_step
            config = trace.config
            gaps = tuple(gap.describe() for gap in trace.gaps)
            held = None if self.window.whole else trace.held
        return TraceInfo(
            self.path, num_steps, trace.complete, dict(trace.meta), dict(config),
            first_step=first, end_step=last + 1, gaps=gaps, dropped_from=trace.dropped_from,
            held=held,
        )  # fmt: skip

    @cached_property
    def request_ids(self) -> tuple[str, ...]:
        """Every request id in workload order (read after the first paint, not before)."""
        return tuple(row[0] for row in self.rows("request_ids").rows)

    def page(self, page: int) -> pa.Table:
        """Rows of steps [page × PAGE_SIZE, (page + 1) × PAGE_SIZE), as Arrow; none past the end."""
        first = page * PAGE_SIZE
        last = max(min(first + PAGE_SIZE, self.info.num_rows), first) - 1
        return self.arrow("step_page", [first, last])

    def step_detail(self, step: int) -> StepDetail:
        """Step `step` in full (`read_step`), kept for the last few steps asked for."""
        with self._lock:
            cached = self._details.get(step)
            if cached is not None:
                self._details.move_to_end(step)
                return cached
        detail = self.read(lambda trace: read_step(trace, step))
        with self._lock:
            self._details[step] = detail
            while len(self._details) > DETAILS_KEPT:
                self._details.popitem(last=False)
        return detail

    def plot(self) -> PlotSeries:
        num_steps = max(self.info.num_rows, 1)
        rows = self.rows("plot_buckets", [min(PLOT_BUCKETS, num_steps), num_steps]).rows
        return PlotSeries(
            num_steps=self.info.num_rows,
            budget_use=tuple(float(use or 0.0) for _, use, _, _ in rows),
            num_free_blocks=tuple(int(free or 0) for _, _, free, _ in rows),
            num_usable_blocks=self.info.num_usable_blocks,
            preempted=tuple(bool(preempted) for _, _, _, preempted in rows),
        )

    def interesting_step(self, step: int, *, forward: bool) -> int | None:
        """The next (or previous) step with a preemption, a full KV cache or the budget used up."""
        found = self.scalar("next_interesting" if forward else "previous_interesting", [step])
        return None if found is None else int(found)

    @cached_property
    def shown_request_ids(self) -> tuple[str, ...]:
        """Every request id as the TUI draws it (`shown_id`), in workload order."""
        return tuple(map(shown_id, self.request_ids))

    def find_request(self, text: str) -> str | None:
        """The first request `find_requests` gives, or None."""
        found = self.find_requests(text, limit=1)
        return found[0] if found else None

    def find_requests(self, text: str, limit: int = MAX_MATCHES) -> list[str]:
        """The request whose id is `text`; else every id starting with it, then containing it.

        An id matches as it is and as it is drawn, so the escaped form of an id with
        control characters in it (all one can type or see of it) finds it too.
        """
        needle = text.strip()
        lowered = needle.lower()
        ids = tuple(zip(self.request_ids, self.shown_request_ids, strict=True))
        exact = [rid for rid, shown in ids if needle in (rid, shown)]
        if exact:
            return exact[:limit]

        def begins(rid: str, shown: str) -> bool:
            return rid.startswith(needle) or shown.startswith(needle)

        def holds(rid: str, shown: str) -> bool:
            return lowered in rid.lower() or lowered in shown.lower()

        starts = [rid for rid, shown in ids if begins(rid, shown)]
        contains = [rid for rid, shown in ids if holds(rid, shown) and not begins(rid, shown)]
        return (starts + contains)[:limit]

    def request_life(self, request_id: str) -> RequestLife | None:
        facts = next(self.rows("request_facts", [request_id]).dicts(), None)
        if facts is None:
            return None
        life = fold_decodes(self.rows("request_life", [request_id]))
        waiting = self.rows("request_waiting", [request_id])
        return RequestLife(request_id, facts, life, waiting)


def fold_decodes(rows: Rows) -> tuple[LifeRow, ...]:
    """Life rows with each run of consecutive decode steps folded into one row."""
    groups: list[list[dict[str, Any]]] = []
    for row in rows.dicts():
        last = groups[-1][-1] if groups else None
        if (
            row["what"] == "decode"
            and last is not None
            and last["what"] == "decode"
            and last["step"] == row["step"] - 1
        ):
            groups[-1].append(row)
        else:
            groups.append([row])
    return tuple(_life_row(group) for group in groups)


def _life_row(group: list[dict[str, Any]]) -> LifeRow:
    first, last = group[0], group[-1]
    if len(group) == 1:
        return LifeRow(
            first_step=int(first["step"]),
            last_step=int(first["step"]),
            what=str(first["what"]),
            num_tokens=first["num_tokens"],
            computed_before=first["computed_before"],
            computed_after=first["computed_after"],
            blocks_held=first["blocks_held"],
            detail=first["detail"] or "",
            sampled=first["sampled_token"] or "",
        )
    added = [row["detail"].removeprefix("blocks ") for row in group if row["detail"]]
    detail = ""
    if added:
        shown = " ".join(added[:3]) + (" …" if len(added) > 3 else "")
        detail = f"blocks {shown} ({len(added)} added)" if len(added) > 3 else f"blocks {shown}"
    return LifeRow(
        first_step=int(first["step"]),
        last_step=int(last["step"]),
        what=f"decode ×{len(group)}",
        num_tokens=sum(int(row["num_tokens"] or 0) for row in group),
        computed_before=first["computed_before"],
        computed_after=last["computed_after"],
        blocks_held=last["blocks_held"],
        detail=detail,
        sampled=f"{first['sampled_token'] or ''} … {last['sampled_token'] or ''}",
    )
