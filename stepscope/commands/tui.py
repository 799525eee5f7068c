"""`stepscope tui`: step through a trace in the terminal, or diff it against another."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stepscope.engine import InputError
from stepscope.replay.sweep_view_result import is_sweep_result, read_sweep
from stepscope.schema import open_trace

from .diff import IgnoreOption, ignores_block_ids


def tui(
    trace: Annotated[Path, typer.Argument(help="A trace file, or a sweep result.")],
    diff: Annotated[
        Path | None,
        typer.Option("--diff", metavar="OTHER", help="A second trace to compare step by step."),
    ] = None,
    ignore: IgnoreOption = None,
) -> None:
    """Step through a trace: timeline, step detail, request lives, SQL console, replay, diff.
    A sweep result opens as its points, each opening its kept trace diffed with the original."""
    ignore_block_ids = ignores_block_ids(ignore)
    if is_sweep_result(trace):
        if diff is not None or ignore:
            raise InputError(f"{trace}: a sweep result opens alone (its points open diffed)")
        read_sweep(trace)  # a result this release cannot read fails here, in one line
    else:
        if ignore and diff is None:
            raise InputError("--ignore compares two traces: give the other one with --diff")
        for path in (trace, diff):
            if path is not None:
                open_trace(path).close()  # a file that is not a trace fails here, in one line
    from stepscope.tui import run_tui

    run_tui(trace, diff, ignore_block_ids)
