"""`stepscope snapshot`: a window of a trace (a recording being written, say) as one trace file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from stepscope.engine import InputError
from stepscope.output_paths import check_outputs, new_file
from stepscope.quantities import parse_duration
from stepscope.safe_text import safe_text
from stepscope.schema.set_members import find_trace
from stepscope.stop_signals import stops_like_ctrl_c
from stepscope.tracer.export.snapshot import SnapshotWindow
from stepscope.tracer.export.snapshot import snapshot as take_snapshot

from .options import TraceNameOption


@stops_like_ctrl_c
def snapshot(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="TRACE",
            help="A recording folder (while it is written too), a trace file, or a folder of "
            "traces (choose one with --trace).",
        ),
    ],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="The trace file to write (must not exist).")
    ],
    last: Annotated[
        str | None,
        typer.Option(
            "--last",
            metavar="TIME",
            help="The steps that ended within the last TIME (90s, 10m, 1h) of the trace.",
        ),
    ] = None,
    last_steps: Annotated[
        int | None,
        typer.Option("--last-steps", metavar="N", min=1, help="The last N steps of the trace."),
    ] = None,
    from_step: Annotated[
        int | None, typer.Option("--from-step", metavar="STEP", help="The window's first step.")
    ] = None,
    to_step: Annotated[
        int | None,
        typer.Option(
            "--to-step", metavar="STEP", help="The window's last step (default: the last)."
        ),
    ] = None,
    name: TraceNameOption = None,
) -> None:
    """Write a window of a trace as one self-contained trace file that replays exactly.

    The window starts at the checkpoint at or before its first step (or step 0), so the
    file holds the scheduler's state there and every step from it; the recording it is
    taken from is only read, never changed."""
    window = _window(last, last_steps, from_step, to_step)
    check_outputs([new_file("-o", output)], [path])
    taken = take_snapshot(find_trace(path, name), output, window)
    widened = (
        f" (from the checkpoint at step {taken.first_step}, "
        f"{taken.asked_from_step - taken.first_step} steps before step {taken.asked_from_step})"
        if taken.first_step < taken.asked_from_step
        else ""
    )
    text = (
        f"wrote {output}: steps {taken.first_step}..{taken.last_step}{widened}, "
        f"{taken.num_requests} requests; replay it with: stepscope replay {output}"
    )
    Console(stderr=True).print(escape(safe_text(text)), highlight=False, soft_wrap=True)


def _window(
    last: str | None, last_steps: int | None, from_step: int | None, to_step: int | None
) -> SnapshotWindow:
    """The options as one window: exactly one of --last, --last-steps and --from-step."""
    given = [option for option, value in _choices(last, last_steps, from_step) if value is not None]
    if len(given) != 1:
        raise InputError(
            "choose the window with one of --last TIME, --last-steps N or --from-step STEP"
            + (f" (given: {', '.join(given)})" if given else "")
        )
    return SnapshotWindow(from_step, to_step, last_steps, None if last is None else _seconds(last))


def _choices(
    last: str | None, last_steps: int | None, from_step: int | None
) -> list[tuple[str, object]]:
    return [("--last", last), ("--last-steps", last_steps), ("--from-step", from_step)]


def _seconds(text: str) -> float:
    seconds = parse_duration(text)
    if seconds is None:
        raise InputError(f"--last {text!r}: expected a time such as 90s, 10m or 1h")
    return seconds
