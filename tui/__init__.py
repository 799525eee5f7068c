"""stepscope.tui: the Textual app (screens, widgets, `.tcss`, workers)."""

from __future__ import annotations

import sys
from pathlib import Path

from stepscope.engine import InputError


def terminal_problem() -> str | None:
    """Why the app cannot run here: Textual reads keys from stdin and draws on stderr."""
    for name, stream in (("stdin", sys.__stdin__), ("stderr", sys.__stderr__)):
        if stream is None or not stream.isatty():
            return f"the TUI needs a terminal, and {name} is not one"
    return None


def run_tui(
    path: str | Path, other: str | Path | None = None, ignore_block_ids: bool = False
) -> None:
    """Open the TUI on a trace (beside `other` when diffing) and return when it quits."""
    problem = terminal_problem()
    if problem is not None:
        raise InputError(problem)
    from .app import StepscopeApp

    StepscopeApp(path, other, ignore_block_ids).run()
