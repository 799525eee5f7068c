"""Strings from a trace or a workload, made safe to print on a terminal.

A request id is whatever the workload (or another tool's trace) said it is: an escape
sequence in one would retitle the user's terminal or recolour the rest of the output.
Every command prints such strings through `safe_text`; the TUI also elides long ones.
"""

from __future__ import annotations

from rich.text import Text

ELLIPSIS = "…"


def safe_text(text: str) -> str:
    """`text` with every unprintable character written as its escape, e.g. `\\x1b`."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def elided(text: str, max_chars: int) -> str:
    """`safe_text(text)` cut to about `max_chars` characters, the middle replaced by `…`.

    Only the kept ends are escaped, so a megabyte-long id costs no more than a short one.
    """
    if len(text) <= max_chars:
        return safe_text(text)
    keep = max(1, (max_chars - 1) // 2)
    head, tail = safe_text(text[:keep]), safe_text(text[-keep:])
    return f"{head[:keep]}{ELLIPSIS}{tail[-keep:]}"


MAX_SHOWN_ID_CHARS = 64
"""Widest request id the TUI draws whole; vLLM's ids are about 40 characters."""


def shown_id(request_id: str) -> str:
    """A request id as the TUI draws it: escaped, and elided past `MAX_SHOWN_ID_CHARS`."""
    return elided(request_id, MAX_SHOWN_ID_CHARS)


MAX_SHOWN_TEXT_CHARS = 400
"""Widest sentence from a trace (a view's `why`, which quotes ids) the TUI draws whole."""


def shown_text(text: str) -> str:
    """A trace's sentence as the TUI draws it: escaped, and elided past `MAX_SHOWN_TEXT_CHARS`."""
    return elided(text, MAX_SHOWN_TEXT_CHARS)


def shown_lines(text: str) -> str:
    """Text of several lines (an error with its hints) as the TUI draws it: each line as
    `shown_text` draws it, the line breaks kept."""
    return "\n".join(map(shown_text, text.split("\n")))


def safe_rich_text(text: str | Text) -> Text:
    """`text` as rich text that is never read as markup, its controls escaped.

    A `Text` keeps its line breaks, and its styling unless something in it had to be
    escaped: then only its base style is kept.
    """
    if isinstance(text, str):
        return Text(safe_text(text))
    lines = text.plain.split("\n")
    if all(map(str.isprintable, lines)):
        return text
    return Text("\n".join(map(safe_text, lines)), style=text.style)
