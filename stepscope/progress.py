"""A progress line on stderr for long replays and checks; silent when stderr is not a terminal."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from stepscope.engine import Scheduler, StepRecord
from stepscope.safe_text import safe_text


class StepProgress:
    """Steps replayed of the steps recorded, one bar per trace, erased when done."""

    def __init__(self, console: Console | None = None, unit: str = "steps") -> None:
        console = console or Console(stderr=True)
        self.progress = Progress(
            TextColumn("[cyan]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(unit),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        )
        self.task = self.progress.add_task("", total=None, visible=False)

    def __enter__(self) -> StepProgress:
        self.progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.progress.stop()

    def start(self, description: str, num_recorded_steps: int) -> None:
        """A new bar for the next trace (the previous one is removed)."""
        self.progress.remove_task(self.task)
        self.task = self.progress.add_task(
            escape(safe_text(description)), total=num_recorded_steps or None
        )

    def on_step(self, record: StepRecord, scheduler: Scheduler) -> None:
        self.progress.update(self.task, completed=record.step + 1)
