"""The SQL console: ask the trace anything, see the views, recall history, cancel a long query."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from stepscope.schema import TraceError, view_infos
from stepscope.schema.step_window import WHOLE, StepWindow
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Header, OptionList, Static
from textual.widgets.option_list import Option

from stepscope.safe_text import safe_text, shown_lines, shown_text

from ..console_session import ConsoleSession, QueryCancelledError, SessionSlot
from ..messages import (
    ConsoleReady,
    QueryCancelled,
    QueryFailed,
    QueryFinished,
    query_failed,
    user_query_failed,
)
from ..models import QueryResult
from ..widgets.auto_width_table import AutoWidthTable
from ..widgets.query_editor import QueryEditor

READY = "ready: ctrl+enter runs the query"

_FIRST_QUERY = "SELECT * FROM summary"
"""The editor's first text: the user's to edit and run, like the text a picked view puts there."""


def _cell(value: Any) -> Text:
    """A result's value as the table draws it: escaped, and elided when very long."""
    if value is None:
        return Text("NULL", style="dim")
    return Text(shown_text(str(value)))


class ConsoleScreen(Screen[None]):
    """A query editor over the trace's views and tables, with results below."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Not priority: in the editor its own `Submitted` runs the query, in turn with the typing.
        Binding("ctrl+enter", "run", "run"),
        Binding("ctrl+j", "run", "run (alias)", show=False),
        Binding("escape", "escape", "cancel / back", priority=True),
    ]

    HELP = """
## SQL console

Write a query over the trace's views (listed left) and tables, and run it with
`ctrl+enter` (or `ctrl+j`). Results show the first 1,000 rows; a query that fails
shows its whole error in their place. `escape` cancels a running query (DuckDB's
interrupt), otherwise goes back. `ctrl+a` selects the whole query. Pick a view to
start a query on it (into a typed query, its name goes in at the cursor), or a past
query from the history. When diffing, the views and tables are A's, and B's are
there too as `b.<name>` (`SELECT * FROM b.why_preempted`).
"""

    def __init__(
        self,
        path: Path,
        other: Path | None = None,
        session: ConsoleSession | None = None,
        window: StepWindow = WHOLE,
    ) -> None:
        """`session`: one opened ahead (the caller keeps it); without, the screen opens its own
        (of the steps of `window`)."""
        super().__init__()
        self.path = path
        self.other = other
        self.window = window
        self.session = session
        self._own_session = None if session is not None else SessionSlot()
        """The session this screen opened itself (and closes when it goes), if it did."""
        self.history: list[str] = []
        self._query_running = False
        self._pending: str | None = None
        """A query run before the session opened: it runs once it has."""
        self._interrupter: Timer | None = None
        self._placed = _FIRST_QUERY
        """The editor's text as the console last put it there (not typed by the user)."""

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="console"):
            with Vertical(id="console-side"):
                yield Static("views", classes="detail-heading")
                yield OptionList(
                    *(Option(f"{v.name}", id=v.name) for v in view_infos()), id="console-views"
                )
                yield Static("history", classes="detail-heading")
                yield OptionList(id="console-history")
            with Vertical(id="console-main"):
                yield QueryEditor(_FIRST_QUERY, id="console-query", soft_wrap=True)
                yield Static("opening…", id="console-status")
                yield AutoWidthTable(id="console-results", zebra_stripes=True)
                yield Static("", id="console-error")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = safe_text(
            f"SQL · {self.path.name}"
            + (f" (B {self.other.name}: b.<view or table>)" if self.other is not None else "")
        )
        views = self.query_one("#console-views", OptionList)
        views.tooltip = "\n".join(f"{v.name}: {v.description}" for v in view_infos())
        self.query_one("#console-query", QueryEditor).focus()
        self.query_one("#console-error").display = False
        if self.session is None:
            self.open_session()
        else:
            self._status(READY, "dim")

    def on_unmount(self) -> None:
        if self.session is not None:
            self.session.interrupt()
        if self._own_session is not None:
            self._own_session.close()  # here, not in a worker: an exiting app runs no more

    # -- workers -------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="console-open")
    def open_session(self) -> None:
        assert self._own_session is not None
        try:
            session = ConsoleSession(self.path, self.other, self.window)
        except TraceError as error:
            self.post_message(query_failed(error, "open"))
            return
        if self._own_session.fill(session):
            self.post_message(ConsoleReady(session))

    @work(thread=True, exclusive=True, group="console-query")
    def run_query(self, session: ConsoleSession, query: str) -> None:
        try:
            result = session.run(query)
        except QueryCancelledError:
            self.post_message(QueryCancelled(query))
        except TraceError as error:
            self.post_message(user_query_failed(error))
        else:
            self.post_message(QueryFinished(result))

    # -- handlers ------------------------------------------------------------------

    def on_console_ready(self, message: ConsoleReady) -> None:
        self.session = message.session
        pending, self._pending = self._pending, None
        if pending is None:
            self._status(READY, "dim")
        else:
            self._start(pending)

    def on_query_finished(self, message: QueryFinished) -> None:
        self._done()
        self._show(message.result)

    def on_query_failed(self, message: QueryFailed) -> None:
        self._done()
        first_line = message.error.splitlines()[0] if message.error else "error"
        self._status(f"error: {first_line}", "bold red")
        error = self.query_one("#console-error", Static)
        error.update(Text(shown_lines(message.error), style="red"))
        self._show_error(shown=True)

    def on_query_cancelled(self, message: QueryCancelled) -> None:
        self._done()
        self._status("cancelled", "bold yellow")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """A view starts a query on it, unless the user typed one: then its name goes in."""
        editor = self.query_one("#console-query", QueryEditor)
        typed = editor.text.strip() not in ("", self._placed.strip())
        if event.option_list.id == "console-views" and typed:
            editor.insert_name(str(event.option.id))
        else:
            view = f"SELECT * FROM {event.option.id} LIMIT 100"
            is_view = event.option_list.id == "console-views"
            editor.text = self._placed = view if is_view else self.history[event.option_index]
        editor.focus()

    def on_query_editor_submitted(self, message: QueryEditor.Submitted) -> None:
        self._submit(message.query)

    # -- actions -------------------------------------------------------------------

    def action_run(self) -> None:
        self._submit(self.query_one("#console-query", QueryEditor).text)

    def _submit(self, text: str) -> None:
        query = text.strip()
        if not query or self._query_running:
            return
        self._remember(query)
        if self.session is None:
            self._pending = query
            self._status("opening the trace… the query runs once it is open", "yellow")
            return
        self._start(query)

    def _start(self, query: str) -> None:
        assert self.session is not None
        self._query_running = True
        self._status("running… (escape cancels)", "yellow")
        self.run_query(self.session, query)

    def action_escape(self) -> None:
        if self._pending is not None:
            self._pending = None
            self._status("cancelled", "bold yellow")
        elif self._query_running and self.session is not None:
            self._status("cancelling…", "yellow")
            session = self.session
            session.interrupt()
            # The query may not have reached DuckDB yet: keep asking until it ends.
            self._interrupter = self.set_interval(0.05, session.interrupt)
        else:
            self.dismiss(None)

    # -- helpers -------------------------------------------------------------------

    def _done(self) -> None:
        self._query_running = False
        if self._interrupter is not None:
            self._interrupter.stop()
            self._interrupter = None

    def _remember(self, query: str) -> None:
        if self.history and self.history[0] == query:
            return
        self.history.insert(0, query)
        options = self.query_one("#console-history", OptionList)
        options.clear_options()
        options.add_options(Text(safe_text(" ".join(q.split())[:60])) for q in self.history)

    def _status(self, text: str, style: str) -> None:
        self.query_one("#console-status", Static).update(Text(shown_text(text), style=style))

    def _show_error(self, *, shown: bool) -> None:
        """The error in the results' place, or the results."""
        self.query_one("#console-error").display = shown
        self.query_one("#console-results").display = not shown

    def _show(self, result: QueryResult) -> None:
        self._show_error(shown=False)
        table = self.query_one("#console-results", DataTable)
        table.clear(columns=True)
        table.add_columns(*(Text(shown_text(column)) for column in result.columns))
        table.add_rows([tuple(_cell(v) for v in row) for row in result.rows])
        more = f", showing the first {len(result.rows):,}" if result.truncated else ""
        self._status(f"{len(result.rows):,}{'+' if result.truncated else ''} rows{more}", "green")
