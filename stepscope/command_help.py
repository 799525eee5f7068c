"""A command's `--help` text, from its docstring.

Typer shows a docstring's first paragraph as one line, and keeps every line break of the
others, where the terminal then wraps them again: ragged lines, cut mid-sentence. Here
each paragraph flows as one line, which the terminal wraps to its width, except a list:
a line that starts with `- ` starts a line of its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

LIST_ITEM = "- "


def command_help(command: Callable[..., Any]) -> str:
    """`command`'s docstring with each paragraph one line (list items one line each)."""
    paragraphs = inspect.cleandoc(command.__doc__ or "").split("\n\n")
    return "\n\n".join(_flowed(paragraph) for paragraph in paragraphs)


def _flowed(paragraph: str) -> str:
    lines: list[str] = []
    for line in paragraph.splitlines():
        line = line.strip()
        if lines and not line.startswith(LIST_ITEM):
            lines[-1] += " " + line
        else:
            lines.append(line)
    return "\n".join(lines)
