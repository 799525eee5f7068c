"""The SQL console: ask the trace anything, see the views, recall history, cancel a long query."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from stepscope.schema import TraceError, view_infos
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Header, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from ..console_session import ConsoleSession, QueryCancelledError
from ..messages import ConsoleReady, QueryCancelled, QueryFailed, QueryFinished
from ..models import QueryResult
from ..widgets.auto_width_table import AutoWidthTable

_FIRST_QUERY = "SELECT * FROM summary"
"""The editor's first text: the user's to edit and run, like the text a picked view puts there."""


def _cell(value: Any) -> Text | str:
    if value is None:
        return Text("NULL", style="dim")
    return str(value)


class ConsoleScreen(Screen[None]):
    """A query editor over the trace's views and tables, with results below."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+enter", "run", "run", priority=True),
        Binding("ctrl+j", "run", "run (alias)", priority=True, show=False),
        Binding("escape", "escape", "cancel / back", priority=True),
    ]

    HELP = """
## SQL console

Write a query over the trace's views (listed left) and tables, and run it with
`ctrl+enter` (or `ctrl+j`). Results show the first 1,000 rows. `escape` cancels
a running query (DuckDB's interrupt), otherwise goes back. Pick a view to start
a query on it, or a past query from the history.
"""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.session: ConsoleSession | None = None
        self.history: list[str] = []
        self._query_running = False
        self._interrupter: Timer | None = None

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
                yield TextArea(_FIRST_QUERY, id="console-query", soft_wrap=True)
                yield Static("opening…", id="console-status")
                yield AutoWidthTable(id="console-results", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"SQL · {self.path.name}"
        views = self.query_one("#console-views", OptionList)
        views.tooltip = "\n".join(f"{v.name}: {v.description}" for v in view_infos())
        self.query_one("#console-query", TextArea).focus()
        self.open_session()

    def on_unmount(self) -> None:
        if self.session is not None:
            self.session.interrupt()
            self._close_session(self.session)

    # -- workers -------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="console-open")
    def open_session(self) -> None:
        try:
            self.post_message(ConsoleReady(ConsoleSession(self.path)))
        except TraceError as error:
            self.post_message(QueryFailed(str(error), "open"))

    @work(thread=True, exclusive=True, group="console-query")
    def run_query(self, session: ConsoleSession, query: str) -> None:
        try:
            result = session.run(query)
        except QueryCancelledError:
            self.post_message(QueryCancelled(query))
        except TraceError as error:
            self.post_message(QueryFailed(str(error)))
        else:
            self.post_message(QueryFinished(result))

    @work(thread=True, group="console-close")
    def _close_session(self, session: ConsoleSession) -> None:
        session.close()

    # -- handlers ------------------------------------------------------------------

    def on_console_ready(self, message: ConsoleReady) -> None:
        self.session = message.session
        self._status("ready: ctrl+enter runs the query", "dim")

    def on_query_finished(self, message: QueryFinished) -> None:
        self._done()
        self._show(message.result)

    def on_query_failed(self, message: QueryFailed) -> None:
        self._done()
        self._status(f"error: {message.error}", "bold red")

    def on_query_cancelled(self, message: QueryCancelled) -> None:
        self._done()
        self._status("cancelled", "bold yellow")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        editor = self.query_one("#console-query", TextArea)
        if event.option_list.id == "console-views":
            editor.text = f"SELECT * FROM {event.option.id} LIMIT 100"
        else:
            editor.text = self.history[event.option_index]
        editor.focus()

    # -- actions -------------------------------------------------------------------

    def action_run(self) -> None:
        query = self.query_one("#console-query", TextArea).text.strip()
        if not query or self.session is None or self._query_running:
            return
        self._query_running = True
        self._remember(query)
        self._status("running… (escape cancels)", "yellow")
        self.run_query(self.session, query)

    def action_escape(self) -> None:
        if self._query_running and self.session is not None:
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
        options.add_options(" ".join(q.split())[:60] for q in self.history)

    def _status(self, text: str, style: str) -> None:
        self.query_one("#console-status", Static).update(Text(text, style=style))

    def _show(self, result: QueryResult) -> None:
        table = self.query_one("#console-results", DataTable)
        table.clear(columns=True)
        table.add_columns(*result.columns)
        table.add_rows([tuple(_cell(v) for v in row) for row in result.rows])
        more = f", showing the first {len(result.rows):,}" if result.truncated else ""
        self._status(f"{len(result.rows):,}{'+' if result.truncated else ''} rows{more}", "green")
