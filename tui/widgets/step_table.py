"""The step timeline: one row per engine step, paged from DuckDB on demand as Arrow.

Only the pages the view shows (and their neighbours) are ever asked for, so a
trace of a million steps paints as fast as one of a hundred. The widget keeps its
own first visible row rather than scrolling, so moving the view repaints this
widget alone, never the whole screen.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, ClassVar

import pyarrow as pa
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from stepscope.safe_text import safe_text, shown_id

from ..messages import PagesWanted, StepCursorMoved
from ..trace_source import PAGE_SIZE

MAX_PAGES = 64
"""Pages kept in memory (least recently used dropped first)."""

_BAR_WIDTH = 8
_EIGHTHS = " ▏▎▍▌▋▊▉█"

_TOKENS_WIDTH = 9
"""The tokens column's least width: `512/512` and a space either side."""

# (title, width, right-aligned)
_COLUMNS: tuple[tuple[str, int, bool], ...] = (
    ("", 2, False),
    ("step", 10, True),
    ("budget", _BAR_WIDTH + 1, False),
    ("tokens", _TOKENS_WIDTH, True),
    ("reqs", 5, True),
    ("run", 5, True),
    ("wait", 5, True),
    ("pre", 4, True),
    ("fin", 4, True),
    ("free", 5, True),
    ("  admission", 22, False),
    ("blocked", 9, False),
)


def tokens_width(token_budget: int) -> int:
    """The tokens column's width: `used/budget` at the budget, with a space either side."""
    return max(_TOKENS_WIDTH, len(f"{token_budget}/{token_budget}") + 2)


def budget_bar(used: int, budget: int, width: int = _BAR_WIDTH) -> str:
    """`used` of `budget` as a bar of `width` cells, in eighths of a cell."""
    eighths = round(8 * width * min(used / budget, 1.0)) if budget > 0 else 0
    full, part = divmod(eighths, 8)
    bar = "█" * full + (_EIGHTHS[part] if part else "")
    return bar.ljust(width, "·")


def flags(row: dict[str, Any], *, divergent: bool) -> str:
    """Marks for a row: ≠ divergent, P preemption, K KV full, B budget used up."""
    if divergent:
        return "≠"
    if row["num_preemptions"]:
        return "P"
    if row["admission_stop"] in ("kv_full", "kv_full_sequence"):
        return "K"
    if row["admission_stop"] == "budget" or row["running_pass_end"] == "budget":
        return "B"
    return ""


class StepTable(Widget, can_focus=True):
    """Every step of the trace; the cursor picks the step the rest of the screen shows."""

    HELP = """
## Step timeline

One row per engine step: the flag (`P` preemption, `K` KV cache full,
`B` token budget used up, `≠` diverges from the other trace), tokens scheduled
against the budget, requests scheduled, running and waiting after the step,
preemptions, finishes, free KV blocks after `schedule()`, why admission stopped
and the waiting head that was blocked.

Rows are read from the trace a page at a time as you move; the mouse wheel
scrolls, a click picks a step.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "move(1)", "next step", show=False),
        Binding("k,up", "move(-1)", "previous step", show=False),
        Binding("right_square_bracket", "move(10)", "+10"),
        Binding("left_square_bracket", "move(-10)", "-10", show=False),
        Binding("right_curly_bracket", "move(100)", "+100", show=False),
        Binding("left_curly_bracket", "move(-100)", "-100", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("g,home", "first", "first step", show=False),
        Binding("G,end", "last", "last step", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "step-table--header",
        "step-table--cursor",
        "step-table--flag",
        "step-table--bar",
        "step-table--dim",
        "step-table--divergent",
    }

    cursor_step: reactive[int] = reactive(0, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.num_steps = 0
        self.num_rows = 0
        """Rows shown: the steps of this trace, or of the longer trace when diffing."""
        self.window_start = 0
        """The first step of the window read (`--from-step`): those before it are outside."""
        self._pages: OrderedDict[int, list[dict[str, Any]]] = OrderedDict()
        self._wanted: set[int] = set()
        self.divergent: frozenset[int] = frozenset()
        self._strips: dict[tuple[int, bool], Strip] = {}
        """Rendered rows by (step, under the cursor), until data or styles change."""
        self.top = 0
        """The first step on screen."""
        self._base: Style | None = None
        """The widget's style, read once per paint."""
        self._tokens_width = _TOKENS_WIDTH

    def columns(self) -> tuple[tuple[str, int, bool], ...]:
        """The columns, the tokens column as wide as the trace's budget needs."""
        return tuple(
            (title, self._tokens_width if title == "tokens" else width, right)
            for title, width, right in _COLUMNS
        )

    @property
    def row_width(self) -> int:
        return sum(width for _, width, _ in self.columns())

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return self.row_width + 1

    # -- data in -------------------------------------------------------------------

    def set_num_steps(self, num_steps: int, num_rows: int | None = None) -> None:
        self.num_steps = num_steps
        self.num_rows = max(num_steps, num_rows or 0)
        self._want_visible_pages()
        self._strips.clear()
        self.refresh()

    def grow(self, num_steps: int, *, pages_kept: int) -> None:
        """The trace now holds `num_steps` rows: the pages from `pages_kept` on (the last one
        was partly filled; a followed recording's oldest steps may be gone) are read again."""
        for page in [page for page in self._pages if page >= pages_kept]:
            del self._pages[page]
        self._wanted = {page for page in self._wanted if page < pages_kept}
        self.set_num_steps(num_steps)

    def set_token_budget(self, token_budget: int) -> None:
        """Widen the tokens column (and the table) for a budget of more digits."""
        self._tokens_width = tokens_width(token_budget)
        self._strips.clear()
        self.refresh(layout=True)

    def add_page(self, page: int, table: pa.Table) -> None:
        """Keep a page of rows (an Arrow table from `step_page.sql`) and repaint it."""
        self._wanted.discard(page)
        self._pages[page] = table.to_pylist()
        self._pages.move_to_end(page)
        while len(self._pages) > MAX_PAGES:
            self._pages.popitem(last=False)
        self._strips.clear()
        self.refresh()

    def mark_divergent(self, steps: frozenset[int]) -> None:
        self.divergent = steps
        self._strips.clear()
        self.refresh()

    @property
    def has_first_page(self) -> bool:
        return 0 in self._pages or self.num_rows == 0

    def row(self, step: int) -> dict[str, Any] | None:
        """The loaded row of `step`, or None when its page is not here yet."""
        page = self._pages.get(step // PAGE_SIZE)
        if page is None:
            return None
        index = step % PAGE_SIZE
        return page[index] if index < len(page) else None

    # -- moving -------------------------------------------------------------------

    def action_move(self, delta: int) -> None:
        self.go_to(self.cursor_step + delta)

    def action_page(self, direction: int) -> None:
        self.go_to(self.cursor_step + direction * max(self.size.height - 2, 1))

    def action_first(self) -> None:
        self.go_to(0)

    def action_last(self) -> None:
        self.go_to(self.num_rows - 1)

    def go_to(self, step: int) -> None:
        self.cursor_step = max(0, min(step, self.num_rows - 1))

    def validate_cursor_step(self, step: int) -> int:
        return max(0, min(step, max(self.num_rows - 1, 0)))

    @property
    def visible_rows(self) -> int:
        return max(self.size.height - 1, 1)

    def watch_cursor_step(self, old: int, new: int) -> None:
        if new < self.top:
            self.scroll_to_row(new)
        elif new >= self.top + self.visible_rows:
            self.scroll_to_row(new - self.visible_rows + 1)
        else:
            for step in (old, new):
                self.refresh(Region(0, step - self.top + 1, self.size.width, 1))
        self.post_message(StepCursorMoved(new))

    def scroll_to_row(self, top: int) -> None:
        """Show rows from `top` on (clamped so the last row sits at the bottom at most)."""
        top = max(0, min(top, self.num_rows - self.visible_rows))
        if top != self.top:
            self.top = top
            self.refresh()
        self._want_visible_pages()

    def on_resize(self) -> None:
        """Keep the cursor on screen: a notice shown above the table takes rows from it."""
        top = self.top
        if self.cursor_step >= top + self.visible_rows:
            top = self.cursor_step - self.visible_rows + 1
        self.scroll_to_row(top)
        self._want_visible_pages()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.scroll_to_row(self.top + 3)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.scroll_to_row(self.top - 3)

    def on_click(self, event: events.Click) -> None:
        if event.y > 0:
            self.go_to(self.top + event.y - 1)

    def _want_visible_pages(self) -> None:
        """Ask for the pages on screen and one either side that are not loaded or asked for."""
        if self.num_steps == 0:
            return
        top = self.top
        first = max(top - PAGE_SIZE // 2, 0) // PAGE_SIZE
        last = min(top + self.size.height + PAGE_SIZE // 2, self.num_steps - 1) // PAGE_SIZE
        wanted = []
        for page in range(first, last + 1):
            if page in self._pages:
                self._pages.move_to_end(page)
            elif page not in self._wanted:
                wanted.append(page)
        if wanted:
            self._wanted.update(wanted)
            self.post_message(PagesWanted(tuple(wanted)))

    # -- painting -----------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def render_lines(self, crop: Region) -> list[Strip]:
        self._base = self.rich_style
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self._base or self.rich_style
        step = -1 if y == 0 else self.top + y - 1
        if step >= self.num_rows:
            return Strip.blank(width, base)
        key = (step, step == self.cursor_step)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._header() if step < 0 else self._row_strip(step)
            if step < 0 or self.row(step) is not None:
                if len(self._strips) > 4096:
                    self._strips.clear()
                self._strips[key] = strip
        return strip.crop(0, width).extend_cell_length(width, base)

    def _header(self) -> Strip:
        style = self.get_component_rich_style("step-table--header")
        text = "".join(_cell(title, width, right=right) for title, width, right in self.columns())
        return Strip([Segment(text, style)])

    def _row_strip(self, step: int) -> Strip:
        is_cursor = step == self.cursor_step
        base = self.get_component_rich_style("step-table--cursor") if is_cursor else Style()
        divergent = step in self.divergent
        if step >= self.num_steps:
            text = (
                _cell("≠", 2, right=False)
                + _cell(f"{step:,}", 10, right=True)
                + "  (only in the other trace)"
            )
            return Strip([Segment(text, base + self.get_component_rich_style("step-table--dim"))])
        row = self.row(step)
        if row is None or not row["recorded"]:
            missing = "  …" if row is None else "  not recorded"
            if row is not None and step < self.window_start:
                missing = "  outside the window"
            text = _cell("", 2, right=False) + _cell(f"{step:,}", 10, right=True) + missing
            return Strip([Segment(text, base + self.get_component_rich_style("step-table--dim"))])
        flag_style = self.get_component_rich_style(
            "step-table--divergent" if divergent else "step-table--flag"
        )
        segments = [
            Segment(_cell(flags(row, divergent=divergent), 2, right=False), base + flag_style)
        ]
        segments.append(Segment(_cell(f"{step:,}", 10, right=True), base))
        if row["idle"]:
            dim = base + self.get_component_rich_style("step-table--dim")
            segments.append(Segment("  idle", dim))
            return Strip(segments)
        used, budget = row["num_scheduled_tokens"], row["token_budget"]
        bar_style = base + self.get_component_rich_style("step-table--bar")
        segments.append(Segment(" " + budget_bar(used, budget), bar_style))
        cells = [
            (f"{used}/{budget}", self._tokens_width, True),
            (str(row["num_scheduled_reqs"]), 5, True),
            (str(row["num_running_after"]), 5, True),
            (str(row["num_waiting_after"]), 5, True),
            (str(row["num_preemptions"] or ""), 4, True),
            (str(row["num_finished"] or ""), 4, True),
            (str(row["num_free_blocks_after_schedule"]), 5, True),
            ("  " + (row["admission_stop"] or ""), 22, False),
            (shown_id(row["blocked_request_id"] or ""), 9, False),
        ]
        text = "".join(_cell(text, width, right=right) for text, width, right in cells)
        segments.append(Segment(text, base))
        return Strip(segments)


def _cell(text: str, width: int, *, right: bool) -> str:
    text = safe_text(text)  # a trace's column may hold any string
    text = text[: width - 1] if len(text) >= width else text
    return text.rjust(width - 1) + " " if right else text.ljust(width)
