"""A sweep result: its points as a table, the Pareto front marked and plotted; a point opens its
kept trace diffed with the original."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from stepscope.engine import InputError
from stepscope.replay.sweep.pareto import parse_objectives
from stepscope.replay.sweep.plot import scatter
from stepscope.replay.sweep.result_reader import read_sweep, replay_command, resolve_beside
from stepscope.replay.sweep.table import DEFAULT_FRONT, SweepTable, sweep_table
from stepscope.replay.sweep.text_plot import text_plot
from stepscope.replay.sweep.view import describe
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from stepscope.safe_text import safe_text, shown_lines, shown_text

from ..messages import QueryFailed, SweepLoaded, query_failed
from ..widgets.safe_table import SafeTable
from .sweep_objectives import SweepObjectivesScreen
from .sweep_point import SweepPointScreen

PLOT_HEIGHT = 12
OPEN_HINT = "enter: the point's kept trace diffed with the swept one"


class SweepScreen(Screen[None]):
    """The points of `path`, ranked and marked; `enter` opens a point's trace against the
    original, `s` sorts, `f` chooses the front's (and the plot's) objectives."""

    CSS_PATH = "sweep.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_point", "open point", show=True),
        Binding("s", "sort", "sort by"),
        Binding("f", "front", "front objectives"),
    ]

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.sort: str | None = None
        self.front = DEFAULT_FRONT
        self.table: SweepTable | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="sweep-summary")
        yield SafeTable(id="sweep-points", cursor_type="row", zebra_stripes=True)
        yield Static("", id="sweep-notice")
        yield Static("", id="sweep-plot")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = safe_text(self.path.name)
        self.query_one("#sweep-notice").display = False
        self.query_one(DataTable).focus()
        self.load(self.sort, self.front)

    @work(thread=True, exclusive=True, group="sweep")
    def load(self, sort: str | None, front: str) -> None:
        """Read the result and rank it; only a message leaves this thread."""
        try:
            self.post_message(SweepLoaded(sweep_table(read_sweep(self.path), sort, front)))
        except InputError as error:
            self.post_message(query_failed(error, "sweep result"))

    def on_sweep_loaded(self, message: SweepLoaded) -> None:
        self.table = table = message.table
        lines = (*describe(table.result), table.front_note, table.order_note, OPEN_HINT)
        self.query_one("#sweep-summary", Static).update(Text("\n".join(map(shown_text, lines))))
        self._fill(table)
        self._draw_plot()

    def on_query_failed(self, message: QueryFailed) -> None:
        self._notice(f"{message.what}: {message.error}", error=True)

    def _fill(self, table: SweepTable) -> None:
        """The rows in the table's order; the cursor stays on the point it was on."""
        view: DataTable[Any] = self.query_one(DataTable)
        current = self._cursor_point()
        view.clear(columns=True)
        view.add_column("", key="front")
        for column in table.columns:
            view.add_column(column, key=column)
        for row in table.rows:
            style = "bold yellow" if table.on_front(row) else ""
            cells = [Text(safe_text(cell), style=style) for cell in table.cells(row)]
            view.add_row(*cells, key=str(row["point"]))
        if current is not None:
            view.move_cursor(row=view.get_row_index(str(current)))

    def _draw_plot(self) -> None:
        plot = self.query_one("#sweep-plot", Static)
        if self.table is None:
            return
        result = self.table.result
        try:
            drawn = scatter(result, parse_objectives(self.front, result.numeric_columns))
        except InputError as error:
            plot.update(Text(shown_text(f"no plot: {error}")))
            return
        plot.update(text_plot(drawn, max(40, self.size.width - 2), PLOT_HEIGHT))

    def on_resize(self) -> None:
        self._draw_plot()

    def _cursor_point(self) -> int | None:
        view: DataTable[Any] = self.query_one(DataTable)
        if view.row_count == 0:
            return None
        key = view.coordinate_to_cell_key(view.cursor_coordinate).row_key.value
        return None if key is None else int(key)

    def _notice(self, text: str, *, error: bool = False) -> None:
        text = shown_lines(text)
        notice = self.query_one("#sweep-notice", Static)
        notice.update(Text(text))
        notice.set_class(error, "-error")
        notice.display = True
        self.notify(text, severity="error" if error else "warning", timeout=10, markup=False)

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open_point()

    def action_open_point(self) -> None:
        """The point's kept trace beside the original, or how to keep it."""
        point = self._cursor_point()
        if self.table is None or point is None:
            return
        result = self.table.result
        row = next(r for r in self.table.rows if r["point"] == point)
        if not row.get("kept_trace"):
            command = replay_command(result, row, f"point{point}.duckdb")
            self._notice(
                f"point {point} has no kept trace: sweep again keeping it, or replay it alone "
                f"and open that: {command}"
            )
            return
        kept = resolve_beside(result.path, str(row["kept_trace"]))
        for path in (result.trace, kept):
            if not path.exists():
                self._notice(f"point {point}: {path}: no such file", error=True)
                return
        self.app.push_screen(SweepPointScreen(result.trace, kept, point))

    def _valid(self, objectives: str, count: int) -> bool:
        """Whether these are `count` objectives over this result's columns; else the notice
        says why."""
        if self.table is None:
            return False
        try:
            parsed = parse_objectives(objectives, self.table.result.numeric_columns)
        except InputError as error:
            self._notice(str(error), error=True)
            return False
        if len(parsed) != count:
            self._notice(f"{objectives!r}: give {count} objective(s)", error=True)
        return len(parsed) == count

    def action_sort(self) -> None:
        def chosen(text: str | None) -> None:
            if text is not None and (not text or self._valid(text, 1)):
                self.sort = text or None
                self.load(self.sort, self.front)

        self.app.push_screen(SweepObjectivesScreen("sort by", "e.g. ttft_p99_steps"), chosen)

    def action_front(self) -> None:
        def chosen(text: str | None) -> None:
            if text is not None and (not text or self._valid(text, 2)):
                self.front = text or DEFAULT_FRONT
                self.load(self.sort, self.front)

        prompt = "front and plot objectives, X:Y"
        self.app.push_screen(
            SweepObjectivesScreen(prompt, "e.g. num_blocks:num_preemptions"), chosen
        )
