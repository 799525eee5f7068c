"""`stepscope tui`: step through a trace in the terminal, or diff it against another."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stepscope.engine import InputError
from stepscope.schema import open_trace

from .diff import IgnoreOption, ignores_block_ids


def tui(
    trace: Annotated[Path, typer.Argument(help="A trace file.")],
    diff: Annotated[
        Path | None,
        typer.Option("--diff", metavar="OTHER", help="A second trace to compare step by step."),
    ] = None,
    ignore: IgnoreOption = None,
) -> None:
    """Step through a trace: timeline, step detail, request lives, SQL console, replay, diff."""
    ignore_block_ids = ignores_block_ids(ignore)
    if ignore and diff is None:
        raise InputError("--ignore compares two traces: give the other one with --diff")
    for path in (trace, diff):
        if path is not None:
            open_trace(path).close()  # a file that is not a readable trace fails here, in one line
    from stepscope.tui import run_tui

    run_tui(trace, diff, ignore_block_ids)
