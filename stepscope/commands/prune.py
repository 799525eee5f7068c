"""`stepscope prune`: delete what stopped recorders left behind, and stopped recordings past
a retention, so a flight recorder's folder stays bounded across server restarts."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from stepscope.engine import InputError
from stepscope.quantities import format_size
from stepscope.safe_text import safe_text
from stepscope.schema.recording_layout import is_recording
from stepscope.stop_signals import stops_like_ctrl_c
from stepscope.tracer.segments.prune import PruneError, PrunePlan, carry_out, plan_prune
from stepscope.tracer.segments.settings import Retention, parse_retention


@stops_like_ctrl_c
def prune(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="DIR",
            help="A folder of recordings (/traces/, as STEPSCOPE_TRACE names it), or one "
            "recording folder.",
        ),
    ],
    retain: Annotated[
        str | None,
        typer.Option(
            "--retain",
            metavar="SIZE,AGE",
            help="Also delete stopped recordings: the oldest while DIR holds more than SIZE "
            "(20GB), and those last written longer ago than AGE (7d); or both (20GB,7d). The "
            "most recently written stopped recording is always kept.",
        ),
    ] = None,
    *,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be deleted; delete nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of lines.")] = False,
) -> None:
    """Delete what recorders no longer need from a folder of recordings.

    Always: what a writer stopped (killed) before deleting, which no reader lists. With
    --retain: whole stopped recordings (a restarted server records into a new folder, so
    each start leaves one). A recording a process writes now is never touched (its own
    retention bounds it), nor is any trace file."""
    chosen = _retention(retain)
    _check_folder(path, chosen)
    try:
        plan = plan_prune(path, chosen, time.time())
    except OSError as error:  # a folder in it this user may not list, say
        raise InputError(f"{path}: cannot read it ({error})") from None
    if not dry_run:
        try:
            carry_out(plan)
        except PruneError as error:
            raise InputError(str(error)) from None
    if as_json:
        typer.echo(json.dumps(_report(plan, dry_run=dry_run), indent=2))
        return
    console = Console()
    _print(console, plan, dry_run=dry_run)
    if chosen is not None and chosen.max_bytes is not None:
        _over_bound(console, plan, chosen.max_bytes)


def _retention(raw: str | None) -> Retention | None:
    if raw is None:
        return None
    try:
        return parse_retention(raw, "--retain")
    except ValueError as error:
        raise InputError(str(error)) from None


def _check_folder(path: Path, retain: Retention | None) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such folder")
    if not path.is_dir():
        raise InputError(f"{path}: not a folder (prune takes a folder of recordings, or one)")
    if retain is not None and is_recording(path):
        raise InputError(
            f"--retain: {path} is one recording, which its writer's own retention bounds; "
            "give the folder that holds the recordings"
        )


def _report(plan: PrunePlan, *, dry_run: bool) -> dict[str, object]:
    return {
        "path": str(plan.folder),
        "dry_run": dry_run,
        "size_bytes_before": plan.size_bytes,
        "size_bytes_after": plan.size_bytes - plan.doomed_bytes,
        "num_recordings": plan.num_recordings,
        "being_recorded": [str(path) for path in plan.being_recorded],
        "deleted": [
            {"path": str(doomed.path), "reason": doomed.reason, "size_bytes": doomed.size_bytes}
            for doomed in plan.doomed
        ],
    }


def _print(console: Console, plan: PrunePlan, *, dry_run: bool) -> None:
    live = len(plan.being_recorded)
    left_alone = f" ({live} being recorded: left alone)" if live else ""
    console.print(
        Text(
            safe_text(
                f"{plan.folder}  {plan.size_bytes / 1e6:.2f} MB in {plan.num_recordings} "
                f"recording{'' if plan.num_recordings == 1 else 's'}{left_alone}"
            )
        )
    )
    if not plan.doomed:
        console.print("nothing to delete")
        return
    verb = "would delete" if dry_run else "deleted"
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column("verb", no_wrap=True)
    table.add_column("path", overflow="fold")
    table.add_column("MB", justify="right", no_wrap=True)
    table.add_column("why", overflow="fold")
    for doomed in plan.doomed:
        table.add_row(
            verb,
            Text(safe_text(_relative(doomed.path, plan.folder))),
            f"{doomed.size_bytes / 1e6:.2f}",
            Text(safe_text(doomed.reason)),
        )
    console.print(table)
    after = (plan.size_bytes - plan.doomed_bytes) / 1e6
    console.print(
        f"{'would free' if dry_run else 'freed'} {plan.doomed_bytes / 1e6:.2f} MB in "
        f"{len(plan.doomed)} folders; {'it would hold' if dry_run else 'it holds'} "
        f"{after:.2f} MB",
        highlight=False,
    )


def _over_bound(console: Console, plan: PrunePlan, max_bytes: int) -> None:
    """A folder still over the size holds only what prune never deletes: say so."""
    after = plan.size_bytes - plan.doomed_bytes
    if after > max_bytes:
        console.print(
            f"still over --retain's {format_size(max_bytes)}: what is left is being recorded "
            "(each bounded by its own retention), trace files, or the newest stopped recording",
            highlight=False,
        )


def _relative(path: Path, folder: Path) -> str:
    """`path` under `folder` (a folder ends in `/`, as `ls -F` shows one)."""
    try:
        shown = str(path.relative_to(folder))
    except ValueError:
        shown = str(path)
    return shown + "/"
