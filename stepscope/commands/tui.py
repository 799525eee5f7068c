"""`stepscope tui`: step through a trace in the terminal, or diff it against another."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stepscope.engine import InputError
from stepscope.replay.sweep.result_reader import is_sweep_result, read_sweep
from stepscope.schema import open_trace
from stepscope.schema.recording_layout import is_recording
from stepscope.schema.set_members import find_trace
from stepscope.schema.step_window import StepWindow

from .diff import IgnoreOption, ignores_block_ids
from .options import ReadFromStepOption, ReadToStepOption, TraceNameOption, step_window


def tui(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="TRACE",
            help="A trace file, a recording folder, a folder of traces (choose one with "
            "--trace), or a sweep result.",
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
    *,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="Keep the timeline's tail live while a recording folder is written: new "
            "steps show within about a second, the cursor on the last step until you move "
            "it (G or End follows again).",
        ),
    ] = False,
    from_step: ReadFromStepOption = None,
    to_step: ReadToStepOption = None,
) -> None:
    """Step through a trace: timeline, step detail, request lives, SQL console, replay, diff.
    A sweep result opens as its points, each opening its kept trace diffed with the original.

    --from-step/--to-step open a window of the trace (of both, with --diff): the timeline,
    the SQL console, the findings and the diff hold its steps only (replay mode still
    replays the recording whole)."""
    ignore_block_ids = ignores_block_ids(ignore)
    window = step_window(from_step, to_step)
    if not window.whole and follow:
        raise InputError(
            "--from-step/--to-step with --follow: --follow keeps the whole recording's tail "
            "live; open a window of it without --follow"
        )
    if follow and (diff is not None or not is_recording(path)):
        raise InputError(
            f"--follow {path}: follows one recording folder as it is written (record into a "
            "folder with --segment, or STEPSCOPE_TRACE_SEGMENT for vLLM)"
        )
    if path.is_file() and is_sweep_result(path):
        if diff is not None or ignore or name is not None or not window.whole:
            raise InputError(f"{path}: a sweep result opens alone (its points open diffed)")
        read_sweep(path)  # a result this release cannot read fails here, in one line
        trace, other = path, None
    else:
        trace, other = _chosen_traces(path, name, diff, ignore=bool(ignore), window=window)
    from stepscope.tui import run_tui

    run_tui(trace, other, ignore_block_ids=ignore_block_ids, follow=follow, window=window)


def _other_trace(path: Path, diff: str) -> Path:
    """`--diff`'s trace: a path, or the name of another trace in the folder `path`."""
    if path.is_dir() and not is_recording(path) and not Path(diff).exists():
        return find_trace(path, diff)
    return Path(diff)


def _chosen_traces(
    path: Path, name: str | None, diff: str | None, *, ignore: bool, window: StepWindow
) -> tuple[Path, Path | None]:
    """The trace to open and the one to diff it with, each checked to be a readable trace."""
    if ignore and diff is None:
        raise InputError("--ignore compares two traces: give the other one with --diff")
    trace = find_trace(path, name)
    other = None if diff is None else _other_trace(path, diff)
    open_trace(trace, window).close()  # not a readable trace, or no such steps: fails here
    if other is not None:
        open_trace(other, window).close()
    return trace, other
