"""The stepscope TUI: step through a trace, inspect a step, a request, diff and replay."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from stepscope.replay.sweep.result_reader import is_sweep_result
from stepscope.schema.step_window import WHOLE, StepWindow
from stepscope.tracer.writer import prepare_new_traces
from textual.app import App
from textual.binding import Binding, BindingType
from textual.widgets import HelpPanel

from .commands import StepscopeCommands
from .messages import FailedOn, QueryFailed, TraceFailed
from .screens.sweep import SweepScreen
from .screens.timeline import TimelineScreen


class StepscopeApp(App[None]):
    """Opens the timeline on `path` (beside `other` when diffing), or the sweep screen on a
    sweep result; `q` quits, `?` helps.

    `failure` is the first read of a trace that failed (a damaged block, a trace that
    would not open): the screens show it, and `stepscope tui` exits with it.
    """

    CSS_PATH = "stepscope.tcss"
    TITLE = "stepscope"
    COMMANDS = App.COMMANDS | {StepscopeCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "toggle_help", "help"),
    ]

    def __init__(
        self,
        path: str | Path,
        other: str | Path | None = None,
        *,
        ignore_block_ids: bool = False,
        follow: bool = False,
        window: StepWindow = WHOLE,
    ) -> None:
        super().__init__()
        self.path = Path(path)
        self.other = Path(other) if other is not None else None
        self.ignore_block_ids = ignore_block_ids
        self.follow = follow
        self.window = window
        self.failure: str | None = None

    def on_mount(self) -> None:
        if self.other is None and is_sweep_result(self.path):
            self.push_screen(SweepScreen(self.path))
            return
        self.push_screen(
            TimelineScreen(
                self.path,
                self.other,
                ignore_block_ids=self.ignore_block_ids,
                follow=self.follow,
                window=self.window,
            )
        )
        if self.other is None:
            # Replay mode (`p`) creates a trace: its first should not wait for the DDL.
            self.run_worker(prepare_new_traces, thread=True, exit_on_error=False)

    def on_trace_failed(self, message: TraceFailed) -> None:
        """Bubbled up from a screen, as is every failed query."""
        self.failure = self.failure or message.error

    def on_query_failed(self, message: QueryFailed) -> None:
        if message.on is FailedOn.DAMAGED_FILE:
            self.failure = self.failure or message.error
        elif message.on is FailedOn.TRACE:
            self.failure = self.failure or f"{self.path}: {message.what}: {message.error}"

    def action_toggle_help(self) -> None:
        """Show the focused widget's help and keys beside it, or hide them."""
        if self.screen.query(HelpPanel):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def action_show_help_panel(self) -> None:
        """Show the help panel; the table narrows so the step detail keeps a usable width."""
        super().action_show_help_panel()
        self.screen.add_class("-help")

    def action_hide_help_panel(self) -> None:
        super().action_hide_help_panel()
        self.screen.remove_class("-help")
