"""The main screen: plot, step timeline and the step under the cursor (two sides when diffing)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import duckdb
from rich.text import Text
from stepscope.engine import InputError
from stepscope.replay.doctor import diagnose
from stepscope.replay.from_step import WHOLE, StepWindow
from stepscope.schema import TraceError
from stepscope.schema.recording_layout import writer_pid
from stepscope.schema.step_gaps import FELL_BEHIND
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Header, Static

from stepscope.safe_text import safe_text, shown_lines, shown_text

from ..console_session import ConsoleSession, SessionSlot
from ..follow import Follower
from ..messages import (
    DiffComputed,
    FailedOn,
    FindingsLoaded,
    PageLoaded,
    PagesWanted,
    PlotLoaded,
    QueryFailed,
    RequestIdsLoaded,
    StepCursorMoved,
    StepDetailLoaded,
    StepFound,
    TraceFailed,
    TraceGrew,
    TraceOpened,
    query_failed,
)
from ..models import TailState, TraceInfo
from ..trace_source import PAGE_SIZE, TraceSource
from ..widgets.diff_banner import DiffBanner
from ..widgets.step_detail import StepDetailView
from ..widgets.step_plot import StepPlot
from ..widgets.step_table import StepTable
from .find_request import FindRequestScreen
from .findings import FindingsScreen
from .goto_step import GotoStepScreen
from .pick_request import PickRequestScreen
from .request_life import RequestLifeScreen

if TYPE_CHECKING:
    from stepscope.replay.diff import StepComparison
    from stepscope.replay.doctor import Finding

_ERRORS = (TraceError, duckdb.Error)

NARROW_BELOW = 130
"""The step table's 91 columns (a few more for a budget of 4 digits or more) and a detail
of about 40 beside it."""

PREFETCH_AFTER_S = 0.05
"""Quiet time after a step's detail shows before the next step's is read ahead."""

REPLACED_SOURCE_KEPT_S = 10.0
"""A followed recording's trace, once replaced by a newer one, stays open this long for
the workers still reading it."""


class TimelineScreen(Screen[None]):
    """Step through a trace; with `other`, beside a second trace, divergent steps marked."""

    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012 (Screen declares it; mypy refuses a ClassVar)
        (0, "-narrow"),
        (NARROW_BELOW, "-wide"),
    ]
    """Narrower than the table and a usable detail side by side: the detail goes below."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "interesting(True)", "next interesting"),
        Binding("N", "interesting(False)", "prev interesting", show=False),
        Binding("d", "divergence(True)", "next diverg."),
        Binding("D", "divergence(False)", "prev divergence", show=False),
        Binding("colon", "goto", "go to step"),
        Binding("slash", "find", "find request"),
        Binding("f", "findings", "findings"),
        Binding("r", "open_request", "request"),
        Binding("s", "console", "SQL"),
        Binding("p", "replay", "replay"),
    ]

    def __init__(
        self,
        path: Path,
        other: Path | None = None,
        *,
        ignore_block_ids: bool = False,
        follow: bool = False,
        window: StepWindow = WHOLE,
    ) -> None:
        super().__init__()
        self.path = path
        self.other_path = other
        self.window = window
        """The steps read (`--from-step/--to-step`), on both sides when diffing; never with
        `follow`."""
        self.ignore_block_ids = ignore_block_ids
        self.follow = follow
        """Keep the timeline the recording's tail while it is written (`--follow`)."""
        self.follower: Follower | None = None
        self._at_tail = follow
        """Followed, the cursor is on the last step and moves with it until the user moves it."""
        self.source: TraceSource | None = None
        self.other: TraceSource | None = None
        self.diff: StepComparison | None = None
        self._detail_running = False
        self._detail_wanted: int | None = None
        self._prefetch: Timer | None = None
        self._first_page_shown = False
        self._plot_asked = False
        self._damage_shown = False
        self.console_session = SessionSlot()
        """The SQL console's connection, opened in the background after the first screen."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="notice")
        if self.other_path is not None:
            yield DiffBanner(id="diff-banner")
        yield StepPlot(id="plot")
        with Horizontal(id="main"):
            yield StepTable(id="steps")
            with Horizontal(id="details"):
                side = "A " if self.other_path is not None else ""
                yield StepDetailView(side, id="detail-a")
                if self.other_path is not None:
                    yield StepDetailView("B ", id="detail-b")
        yield Footer()

    def on_mount(self) -> None:
        self.set_class(self.other_path is not None, "-diff")
        self.query_one("#notice").display = False
        self.sub_title = safe_text(
            self.path.name + (f" ↔ {self.other_path.name}" if self.other_path is not None else "")
        )
        self.query_one(StepTable).focus()
        self.open_traces()

    def on_unmount(self) -> None:
        for source in (self.source, self.other):
            if source is not None:
                source.close()
        self.console_session.close()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "divergence":
            return self.other_path is not None
        return True

    # -- workers: all DuckDB work happens here, and only posts messages ------------

    @work(thread=True, exclusive=True, group="open")
    def open_traces(self) -> None:
        try:
            source = TraceSource(self.path, self.window)
            _ = source.info
            other = None if self.other_path is None else TraceSource(self.other_path, self.window)
            if other is not None:
                _ = other.info
        except _ERRORS as error:
            self.post_message(TraceFailed(str(error)))
            return
        self.post_message(TraceOpened(source, other))

    @work(thread=True, group="pages")
    def load_pages(self, source: TraceSource, pages: tuple[int, ...]) -> None:
        for page in pages:
            try:
                self.post_message(PageLoaded(page, source.page(page)))
            except _ERRORS as error:
                self.post_message(query_failed(error, "step rows"))
                return

    @work(thread=True, exclusive=True, group="plot")
    def load_plot(self, source: TraceSource) -> None:
        """The plot, then the request ids that finding a request offers."""
        try:
            self.post_message(PlotLoaded(source.plot()))
            source.shown_request_ids  # noqa: B018 (read now, in the background)
        except _ERRORS as error:
            self.post_message(query_failed(error, "plot"))

    @work(thread=True, group="detail")
    def load_detail(
        self,
        source: TraceSource,
        other: TraceSource | None,
        step: int,
        diff: StepComparison | None,
    ) -> None:
        """The step's detail on both sides, marked with what the diff found differs there
        (nothing until the diff is computed: then the step is shown again)."""
        try:
            detail = source.step_detail(step)
            other_detail = other.step_detail(step) if other is not None else None
        except _ERRORS as error:
            self.post_message(query_failed(error, f"step {step}"))
            return
        found = diff.fields_at(step) if diff is not None else ()
        self.post_message(StepDetailLoaded(detail, other_detail, found))

    @work(thread=True, exclusive=True, group="prefetch")
    def prefetch_detail(self, source: TraceSource, other: TraceSource | None, step: int) -> None:
        """Read a step's detail into the sources' caches, ahead of the key that will want it."""
        for side in (source, other):
            if side is not None and step < side.info.num_steps:
                with contextlib.suppress(*_ERRORS):
                    side.step_detail(step)

    @work(thread=True, exclusive=True, group="diff")
    def compute_diff(self, source: TraceSource, other: TraceSource) -> None:
        # Imported with a second trace only (it brings pyarrow.compute).
        from ..diffing import diff_traces, diff_window

        try:
            window, note = diff_window(source, other, self.window)
            compared = diff_traces(
                source, other, ignore_block_ids=self.ignore_block_ids, window=window
            )
        except (*_ERRORS, InputError) as error:
            self.post_message(query_failed(error, "diff"))
            return
        self.post_message(DiffComputed(compared, note))

    @work(thread=True, exclusive=True, group="console-open")
    def open_console_session(self) -> None:
        """The SQL console's connection, opened once the screen has its rows, detail and plot,
        so `s` finds it open; if it cannot open, the console says why when opened."""
        with contextlib.suppress(*_ERRORS):
            self.console_session.fill(ConsoleSession(self.path, self.other_path, self.window))

    @work(thread=True, exclusive=True, group="find")
    def find_interesting(self, source: TraceSource, step: int, *, forward: bool) -> None:
        try:
            found = source.interesting_step(step, forward=forward)
        except _ERRORS as error:
            self.post_message(query_failed(error, "search"))
            return
        self.post_message(StepFound(found, "interesting step"))

    # -- handlers: the screen's state changes only here ----------------------------

    def on_trace_opened(self, message: TraceOpened) -> None:
        self.source, self.other = message.source, message.other
        info = message.info
        table = self.query_one(StepTable)
        other_steps = self.other.info.num_rows if self.other is not None else None
        budgets = [info.token_budget] + ([self.other.info.token_budget] if self.other else [])
        table.set_token_budget(max(budgets))
        if info.held is not None:
            table.window_start = info.first_step
        table.set_num_steps(info.num_rows, other_steps)
        if info.first_step > 0 and info.num_steps:
            self.go_to(info.first_step)
            table.scroll_to_row(info.first_step)  # the steps held below it, not those before
        writer = writer_pid(self.path)
        notices = self._notices(info, writer)
        if notices:
            self._show_notice(notices, "warning")
        if info.num_steps == 0:
            self._want_detail(table.cursor_step)
        if self.other is not None:
            self.query_one(DiffBanner).show(None, info.path.name, self.other.info.path.name)
            self.compute_diff(self.source, self.other)
        if self.follow:
            self._follow(info, writer)

    def _notices(self, info: TraceInfo, writer: int | None) -> str:
        """What the traces lack, one line each ("": nothing). A recording a process records
        into now (`writer`) is not incomplete: a followed one's subtitle says it is being
        recorded, and one not followed is said to show the steps it held when opened."""
        notices = self._not_held(info)
        if writer is not None and not self.follow:
            notices.append(self._recording_now(info))
        elif not info.complete and writer is None:
            notices.append(self._incomplete(info))
        if self.other is not None and not self.other.info.complete:
            other = self.other.info
            live = writer_pid(other.path) is not None
            notices.append(self._recording_now(other) if live else self._incomplete(other))
        if info.num_steps == 0:
            notices.append(f"{info.path.name} holds no steps.")
        return "\n".join(notices)

    def _follow(self, info: TraceInfo, writer: int | None) -> None:
        """Start following the recording from its last step."""
        state = TailState.of(info, writer)
        self.follower = Follower(self, self.path, state)
        self.sub_title = safe_text(state.describe(self.path))
        self.follower.start()
        self.go_to(info.num_rows - 1)

    def on_trace_grew(self, message: TraceGrew) -> None:
        """The followed recording holds other steps: show them, the cursor on the last if it
        was there."""
        old, new = self.source, message.source
        if old is None or self.follower is None:
            new.close()
            return
        self.source, self.follower.shown = new, message.state
        moved_on = new.info.first_step != old.info.first_step
        pages_kept = 0 if moved_on else old.info.num_rows // PAGE_SIZE
        self.query_one(StepTable).grow(new.info.num_rows, pages_kept=pages_kept)
        self.sub_title = safe_text(message.state.describe(self.path))
        self._renew_notice(self._notices(new.info, message.state.writer))
        self._plot_asked = False
        if self._at_tail:
            self.go_to(new.info.num_rows - 1)
        else:
            self._want_detail(self.step)
        self.set_timer(REPLACED_SOURCE_KEPT_S, old.close)

    @staticmethod
    def _not_held(info: TraceInfo) -> list[str]:
        """What the trace lacks between step 0 and its last."""
        notices = []
        if info.held is not None:
            first, last = info.held
            notices.append(
                f"{info.path.name}: steps {info.first_step:,}..{info.num_rows - 1:,} of "
                f"{first:,}..{last:,} are shown (--from-step/--to-step)."
            )
        elif info.first_step > 0 and info.num_steps:
            notices.append(
                f"{info.path.name} starts at step {info.first_step:,} (the recording's "
                "older segments were deleted)."
            )
        notices += [f"{info.path.name}: {gap}." for gap in info.gaps]
        return notices

    @staticmethod
    def _recording_now(info: TraceInfo) -> str:
        return (
            f"{info.path.name} is being recorded: the {info.num_steps:,} steps it held when "
            "opened are shown (tui --follow shows new steps as they come)."
        )

    @staticmethod
    def _incomplete(info: TraceInfo) -> str:
        if info.dropped_from is not None:
            return (
                f"{info.path.name}: the steps from {info.dropped_from:,} on were not recorded "
                f"({FELL_BEHIND})."
            )
        return (
            f"{info.path.name} is incomplete: the recording stopped early; "
            f"its {info.num_steps:,} flushed steps are shown."
        )

    def on_trace_failed(self, message: TraceFailed) -> None:
        self._show_notice(f"Cannot open this trace: {message.error}", "error")

    def _renew_notice(self, text: str) -> None:
        """A followed recording's notice, as it holds now: changed in place (no toast every
        time retention deletes a segment), hidden once there is nothing to say."""
        notice = self.query_one("#notice", Static)
        if notice.has_class("-error"):
            return
        notice.update(Text(shown_lines(text)))
        notice.display = bool(text)

    def _show_notice(self, text: str, severity: str) -> None:
        text = shown_lines(text)
        notice = self.query_one("#notice", Static)
        notice.update(Text(text))
        notice.set_class(severity == "error", "-error")
        notice.display = True
        self.notify(
            text, severity="error" if severity == "error" else "warning", timeout=8, markup=False
        )

    @on(PagesWanted)
    def _pages_wanted(self, message: PagesWanted) -> None:
        if self.source is not None:
            self.load_pages(self.source, message.pages)

    def on_page_loaded(self, message: PageLoaded) -> None:
        self.query_one(StepTable).add_page(message.page, message.table)
        # First the rows (a few read), then the detail (joins the requests), then the plot
        # (scans every step): each waits for the one before, so the rows show first.
        if not self._first_page_shown:
            self._first_page_shown = True
            self._want_detail(self.query_one(StepTable).cursor_step)

    def _want_plot(self) -> None:
        if self.source is not None and not self._plot_asked:
            self._plot_asked = True
            self.load_plot(self.source)

    def on_plot_loaded(self, message: PlotLoaded) -> None:
        plot = self.query_one(StepPlot)
        plot.series = message.series
        plot.cursor_step = self.query_one(StepTable).cursor_step
        self.open_console_session()

    def on_step_cursor_moved(self, message: StepCursorMoved) -> None:
        if self.follow:
            self._at_tail = message.step == self.query_one(StepTable).num_rows - 1
        if self._prefetch is not None:
            self._prefetch.stop()
            self._prefetch = None
        self.query_one(StepPlot).cursor_step = message.step
        self._want_detail(message.step)

    def _want_detail(self, step: int) -> None:
        """Load the step's detail; while a load runs, only the latest wanted step is kept."""
        self._detail_wanted = step
        if self.source is None or self._detail_running:
            return
        self._detail_running = True
        self._detail_wanted = None
        self.load_detail(self.source, self.other, step, self.diff)

    def on_step_detail_loaded(self, message: StepDetailLoaded) -> None:
        self._detail_running = False
        self._want_plot()
        self.query_one("#detail-a", StepDetailView).show(message.detail, message.differences)
        if message.other is not None:
            self.query_one("#detail-b", StepDetailView).show(message.other, message.differences)
        if self._detail_wanted is not None and self._detail_wanted != message.detail.step:
            self._want_detail(self._detail_wanted)
        elif self.source is not None:
            # Stepping forward is the likeliest next key: once keys pause, read that step.
            source, other, step = self.source, self.other, message.detail.step + 1
            self._prefetch = self.set_timer(
                PREFETCH_AFTER_S, lambda: self.prefetch_detail(source, other, step)
            )

    def on_diff_computed(self, message: DiffComputed) -> None:
        self.diff = message.diff
        if message.note is not None:
            self.notify(shown_text(message.note), timeout=8, markup=False)
        assert self.source is not None and self.other is not None
        self.query_one(DiffBanner).show(
            self.diff, self.source.info.path.name, self.other.info.path.name
        )
        self.query_one(StepTable).mark_divergent(frozenset(self.diff.divergent_steps))
        if self.source is not None:
            self._want_detail(self.step)  # marked now with what differs at it

    def on_query_failed(self, message: QueryFailed) -> None:
        self._detail_running = False
        self._want_plot()
        if message.on is not FailedOn.DAMAGED_FILE:
            text = shown_text(f"{message.what}: {message.error}")
            self.notify(text, severity="error", timeout=8, markup=False)
        elif not self._damage_shown:
            self._damage_shown = True
            self._show_notice(f"Cannot read all of this trace: {message.error}", "error")

    def on_step_found(self, message: StepFound) -> None:
        if message.step is None:
            self.notify(f"no {message.what} that way", timeout=3)
        else:
            self.go_to(message.step)

    # -- actions ------------------------------------------------------------------

    @property
    def step(self) -> int:
        return self.query_one(StepTable).cursor_step

    def go_to(self, step: int) -> None:
        self.query_one(StepTable).go_to(step)

    # Textual passes an action's arguments (`interesting(True)`) by position.
    def action_interesting(self, forward: bool) -> None:  # noqa: FBT001
        if self.source is not None:
            self.find_interesting(self.source, self.step, forward=forward)

    def action_divergence(self, forward: bool) -> None:  # noqa: FBT001
        if self.diff is None:
            self.notify("the diff is still being computed", timeout=3)
            return
        found = self.diff.next_divergence(self.step, forward=forward)
        self.post_message(StepFound(found, "divergent step"))

    def action_goto(self) -> None:
        def chosen(step: int | None) -> None:
            if step is not None:
                self.go_to(step)

        self.app.push_screen(GotoStepScreen(), chosen)

    def action_find(self) -> None:
        if self.source is not None:
            self.load_request_ids(self.source)

    @work(thread=True, exclusive=True, group="request-ids")
    def load_request_ids(self, source: TraceSource) -> None:
        """The ids `/` offers, as drawn (read once, usually in the background after the plot)."""
        try:
            self.post_message(RequestIdsLoaded(source.shown_request_ids))
        except _ERRORS as error:
            self.post_message(query_failed(error, "request ids"))

    def on_request_ids_loaded(self, message: RequestIdsLoaded) -> None:
        """Ask for a request id, then open its life (or choose among those that match)."""
        if self.source is None:
            return
        source = self.source

        def chosen(text: str | None) -> None:
            if not text:
                return
            matches = source.find_requests(text)
            if not matches:
                shown = shown_text(repr(text))
                self.notify(
                    f"no request matches {shown}", severity="warning", timeout=4, markup=False
                )
            elif len(matches) == 1:
                self.open_request(matches[0])
            else:
                self.app.push_screen(PickRequestScreen(text, matches), picked)

        def picked(request_id: str | None) -> None:
            if request_id is not None:
                self.open_request(request_id)

        self.app.push_screen(FindRequestScreen(message.request_ids), chosen)

    def action_findings(self) -> None:
        self.notify("looking for what is wrong…", timeout=2)
        self.load_findings(self.path)

    @work(thread=True, exclusive=True, group="findings")
    def load_findings(self, path: Path) -> None:
        """`stepscope doctor --no-what-if` on the trace, in the background."""
        try:
            diagnosis = diagnose(path, path, self.window, what_ifs=False)
        except (*_ERRORS, InputError) as error:
            self.post_message(query_failed(error, "findings"))
            return
        self.post_message(FindingsLoaded(diagnosis.findings))

    def on_findings_loaded(self, message: FindingsLoaded) -> None:
        def chosen(finding: Finding | None) -> None:
            if finding is None:
                return
            for view in self.query(StepDetailView):
                view.highlight(frozenset(finding.requests))
            self.go_to(finding.steps[0])

        self.app.push_screen(FindingsScreen(message.findings), chosen)

    def action_open_request(self) -> None:
        focused = self.focused
        view = self.query_one("#detail-a", StepDetailView)
        if focused is not None and self.other_path is not None:
            for candidate in self.query(StepDetailView):
                if focused in candidate.walk_children():
                    view = candidate
        request_id = view.selected_request()
        if request_id is None:
            self.action_find()
        else:
            self.open_request(request_id)

    def open_request(self, request_id: str) -> None:
        if self.source is None:
            return

        def chosen(step: int | None) -> None:
            if step is not None:
                self.go_to(step)

        self.app.push_screen(RequestLifeScreen(self.source, request_id), chosen)

    def action_console(self) -> None:
        from .console import ConsoleScreen  # its editor's imports wait until first opened

        if self.source is not None:
            screen = ConsoleScreen(
                self.path, self.other_path, self.console_session.session, self.window
            )
            self.app.push_screen(screen)

    def action_replay(self) -> None:
        if self.source is None:
            return
        from .replay import ReplayScreen  # the engine is imported when replay is first opened

        def chosen(step: int | None) -> None:
            if step is not None:
                self.go_to(step)

        # The replay starts at the cursor's step (from the trace's nearest checkpoint).
        self.app.push_screen(ReplayScreen(self.path, self.step), chosen)
