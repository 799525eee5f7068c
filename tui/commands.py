"""The command palette's stepscope commands (ctrl+p): every action of the timeline, by name."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import Hit, Hits, Provider
from textual.content import Content
from textual.fuzzy import Matcher

from stepscope.safe_text import shown_id

from .screens.timeline import TimelineScreen

_ACTIONS: tuple[tuple[str, str, str], ...] = (
    ("Go to step…", "goto", "jump to a step by number"),
    ("Next interesting step", "interesting(True)", "preemption, KV cache full or budget used up"),
    ("Previous interesting step", "interesting(False)", "preemption, KV full or budget used up"),
    ("Next divergence", "divergence(True)", "the next step where the two traces differ"),
    ("Previous divergence", "divergence(False)", "the previous divergent step"),
    ("Find request…", "find", "open a request's life by id"),
    ("SQL console", "console", "query the trace's views and tables"),
    ("Replay", "replay", "re-run the scheduler beside the recording"),
)

MAX_REQUEST_HITS = 2000


class StepscopeCommands(Provider):
    """Timeline actions, and 'request <id>' for every request of the trace."""

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        screen = self.screen
        if not isinstance(screen, TimelineScreen):
            return []
        commands: list[tuple[str, Callable[[], object], str]] = [
            (name, partial(screen.run_action, action), help)
            for name, action, help in _ACTIONS
            if screen.check_action(action.split("(")[0], ()) is not False
        ]
        if screen.source is not None:
            for request_id in screen.source.request_ids[:MAX_REQUEST_HITS]:
                commands.append(
                    (
                        f"request {shown_id(request_id)}",
                        partial(screen.open_request, request_id),
                        "life",
                    )
                )
        return commands

    async def discover(self) -> Hits:
        for name, callback, help in self._commands()[: len(_ACTIONS)]:
            yield Hit(1.0, name, callback, help=help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, highlighted(matcher, name), callback, help=help)


def highlighted(matcher: Matcher, name: str) -> Content:
    """`name` with the query's letters marked, as `Matcher.highlight` marks them, but never
    read as markup: a request id's `[` is drawn as typed."""
    content = Content(name)
    _, offsets = matcher.fuzzy_search.match(matcher.query, name)
    for offset in offsets:
        if not name[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content
