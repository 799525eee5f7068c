"""When several requests match what `/` was given: a list to choose one from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from stepscope.safe_text import elided, shown_text

MAX_SHOWN = 120
"""Characters of an id drawn in the list (a crafted id can be megabytes)."""


def _shown(request_id: str) -> Text:
    """The id as the list draws it: escaped, elided past `MAX_SHOWN`, never markup."""
    return Text(elided(request_id, MAX_SHOWN))


class PickRequestScreen(ModalScreen[str | None]):
    """The matching request ids; dismissed with the one chosen, or None on escape."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, text: str, request_ids: Sequence[str]) -> None:
        super().__init__()
        self.text = text
        self.request_ids = request_ids

    def compose(self) -> ComposeResult:
        with Vertical(classes="prompt"):
            matched = shown_text(repr(self.text))
            yield Label(Text(f"{len(self.request_ids):,} requests match {matched}: pick one"))
            yield OptionList(
                *(Option(_shown(rid), id=str(i)) for i, rid in enumerate(self.request_ids)),
                id="pick-request",
            )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.request_ids[event.option_index])

    def action_cancel(self) -> None:
        self.dismiss(None)
