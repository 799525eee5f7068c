"""`:` — ask for a step number and go there."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class GotoStepScreen(ModalScreen[int | None]):
    """A one-line prompt for a step number; dismissed with it, or None on escape."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="prompt"):
            yield Label("go to step")
            yield Input(placeholder="step number, e.g. 4210", type="integer", id="goto-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip().replace(",", "").replace("_", "")
        self.dismiss(int(text) if text.lstrip("-").isdigit() else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
