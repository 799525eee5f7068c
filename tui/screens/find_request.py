"""`/` — ask for a request id (completed from the trace's ids) and open its life."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label


class FindRequestScreen(ModalScreen[str | None]):
    """A one-line prompt for a request id; dismissed with the text, or None on escape.

    `shown_ids` are the ids as the TUI draws them: the suggestions, and what finds them."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, shown_ids: Sequence[str]) -> None:
        super().__init__()
        self.shown_ids = shown_ids

    def compose(self) -> ComposeResult:
        with Vertical(classes="prompt"):
            yield Label(f"find a request ({len(self.shown_ids):,} in this trace)")
            yield Input(
                placeholder="request id, or part of one",
                suggester=SuggestFromList(self.shown_ids, case_sensitive=False),
                id="find-input",
            )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
