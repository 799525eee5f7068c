"""stepscope.tui: the Textual app (screens, widgets, `.tcss`, workers)."""

from __future__ import annotations

from pathlib import Path


def run_tui(
    path: str | Path, other: str | Path | None = None, ignore_block_ids: bool = False
) -> None:
    """Open the TUI on a trace (beside `other` when diffing) and return when it quits."""
    from .app import StepscopeApp

    StepscopeApp(path, other, ignore_block_ids).run()
