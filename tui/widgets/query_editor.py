"""The console's query editor: a TextArea where `ctrl+a` selects all, as editors do, and
`ctrl+enter` (or `ctrl+j`) submits the query."""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.widgets import TextArea

RUN_KEYS = frozenset({"ctrl+enter", "ctrl+j"})
"""The keys that submit the query (`ctrl+j` for terminals that send no `ctrl+enter`)."""


class QueryEditor(TextArea):
    """`ctrl+a` selects the whole query (`home` still goes to the line's start).

    The editor acts on these keys as they come, in turn with the text typed around them.
    A binding acts out of turn. A priority one acts when the key arrives, before the editor
    has taken the keys typed just before it, so a query typed right before `ctrl+j` ran
    without its end. Any other binding acts after the key has gone up to the app, by which
    time the keys typed after it are in, so text pasted after `ctrl+a` lost its start.
    """

    class Submitted(Message):
        """`ctrl+enter` (or `ctrl+j`) in the editor: `query` is its text as it was then."""

        def __init__(self, query: str) -> None:
            super().__init__()
            self.query = query

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "ctrl+a":
            self._handled(event)
            self.select_all()
        elif event.key in RUN_KEYS:
            self._handled(event)
            self.post_message(self.Submitted(self.text))
        else:
            await super()._on_key(event)

    @staticmethod
    def _handled(event: events.Key) -> None:
        event.stop()
        event.prevent_default()

    def insert_name(self, name: str) -> None:
        """Put `name` at the cursor, replacing any selection, with a space where words meet."""
        start, end = sorted(self.selection)
        before = self.get_text_range((start[0], 0), start)
        after = self.get_text_range(end, (end[0], len(self.document.get_line(end[0]))))
        left = " " if before and not before[-1].isspace() else ""
        right = " " if after and not after[0].isspace() else ""
        self.replace(f"{left}{name}{right}", start, end)
