"""stepscope.tui: the Textual app (screens, widgets, `.tcss`, workers)."""

from __future__ import annotations

import sys
from pathlib import Path

from stepscope.engine import InputError
from stepscope.schema import TraceError
from stepscope.schema.step_window import WHOLE, StepWindow


def terminal_problem() -> str | None:
    """Why the app cannot run here: Textual reads keys from stdin and draws on stderr."""
    for name, stream in (("stdin", sys.__stdin__), ("stderr", sys.__stderr__)):
        if stream is None or not stream.isatty():
            return f"the TUI needs a terminal, and {name} is not one"
    return None


def run_tui(
    path: str | Path,
    other: str | Path | None = None,
    *,
    ignore_block_ids: bool = False,
    follow: bool = False,
    window: StepWindow = WHOLE,
) -> None:
    """Open the TUI on a trace (beside `other` when diffing; its tail live with `follow`;
    the steps of `window` only) and return when it quits.

    A trace it could not read (a damaged block, found while it ran) is a TraceError once
    it has quit; a crash ends the process with the app's exit status.
    """
    problem = terminal_problem()
    if problem is not None:
        raise InputError(problem)
    from .app import StepscopeApp

    app = StepscopeApp(path, other, ignore_block_ids=ignore_block_ids, follow=follow, window=window)
    app.run()
    if app.failure is not None:
        raise TraceError(app.failure)
    if app.return_code:
        raise SystemExit(app.return_code)
