"""`s` / `f` on a sweep: ask for objectives (`min:`/`max:` before a column, `:` between two)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class SweepObjectivesScreen(ModalScreen[str | None]):
    """A one-line prompt; dismissed with the text (empty: back to the default), None on escape."""

    DEFAULT_CSS = "SweepObjectivesScreen { align: center middle; }"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, prompt: str, placeholder: str) -> None:
        super().__init__()
        self.prompt = prompt
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(classes="prompt"):
            yield Label(
                Text(f"{self.prompt} ([min:|max:]COLUMN; a bare column takes its usual sense)")
            )
            yield Input(placeholder=self.placeholder, id="objectives-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
