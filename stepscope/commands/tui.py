"""`stepscope tui`: step through a trace in the terminal, or diff it against another."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stepscope.engine import InputError
from stepscope.schema import open_trace
from stepscope.schema.set_members import find_trace

from .diff import IgnoreOption, ignores_block_ids
from .options import TraceNameOption


def tui(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="TRACE", help="A trace file, or a folder of traces (choose one with --trace)."
        ),
    ],
    name: TraceNameOption = None,
    diff: Annotated[
        str | None,
        typer.Option(
            "--diff",
            metavar="OTHER",
            help="A second trace to compare step by step: a file, or another trace of the "
            "folder by name.",
        ),
    ] = None,
    ignore: IgnoreOption = None,
) -> None:
    """Step through a trace: timeline, step detail, request lives, SQL console, replay, diff."""
    ignore_block_ids = ignores_block_ids(ignore)
    if ignore and diff is None:
        raise InputError("--ignore compares two traces: give the other one with --diff")
    trace = find_trace(path, name)
    other = None if diff is None else _other_trace(path, diff)
    for opened in (trace, other):
        if opened is not None:
            open_trace(
                opened
            ).close()  # a file that is not a readable trace fails here, in one line
    from stepscope.tui import run_tui

    run_tui(trace, other, ignore_block_ids)


def _other_trace(path: Path, diff: str) -> Path:
    """`--diff`'s trace: a path, or the name of another trace in the folder `path`."""
    if path.is_dir() and not Path(diff).exists():
        return find_trace(path, diff)
    return Path(diff)
