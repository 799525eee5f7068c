"""What `stepscope info` shows of a folder of traces: one line per trace, as `/traces/` holds
them (a flight recorder's folder per engine start, trace files beside them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stepscope.safe_text import safe_text
from stepscope.schema import TraceError, open_trace
from stepscope.schema.recording_layout import folder_bytes, writer_pid
from stepscope.schema.set_members import Member

from .info_recording import recording_report

_READ_FACTS = (
    "state",
    "writer_pid",
    "complete",
    "num_steps",
    "first_step",
    "last_step",
    "created_at",
)
"""What is read from each trace (None where it cannot be read)."""


def set_report(folder: Path, members: tuple[Member, ...]) -> dict[str, Any]:
    """Each trace of the folder in a few facts; one that cannot be read says why."""
    traces = [_member_report(member) for member in members]
    return {
        "path": str(folder),
        "size_bytes": sum(trace["size_bytes"] for trace in traces),
        "traces": traces,
    }


def _member_report(member: Member) -> dict[str, Any]:
    recording = member.path.is_dir()
    report: dict[str, Any] = {
        "name": member.name,
        "path": str(member.path),
        "kind": "recording" if recording else "file",
        "size_bytes": folder_bytes(member.path) if recording else _file_bytes(member.path),
        "error": None,
        **dict.fromkeys(_READ_FACTS),
    }
    try:
        with open_trace(member.path) as opened:
            writer = recording_report(opened)["writer"] if recording else None
            report |= {
                "state": _state(writer, opened.dropped_from, complete=opened.complete),
                "writer_pid": writer_pid(member.path) if recording else None,
                "complete": opened.complete,
                "num_steps": opened.num_steps,
                "first_step": opened.first_step,
                "last_step": opened.last_step,
                "created_at": opened.meta.get("created_at"),
            }
    except TraceError as error:
        report |= {"state": "unreadable", "error": str(error)}
    return report


def _file_bytes(path: Path) -> int:
    """The file's size (0 when it went away since the folder was listed)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _state(writer: str | None, dropped_from: int | None, *, complete: bool) -> str:
    """The trace's state in a word or two: a recording's writer first, then whether the
    steps run to the end."""
    if writer == "recording":
        return "recording now"
    if writer == "stopped":
        return "not closed (killed?)"
    if complete:
        return "complete"
    return "dropped its end" if dropped_from is not None else "incomplete"


def print_set(console: Console, report: dict[str, Any]) -> None:
    traces = report["traces"]
    console.print(
        Text.assemble(
            (safe_text(report["path"]), "bold"),
            f"  a folder of {len(traces)} traces  {report['size_bytes'] / 1e6:.2f} MB",
        )
    )
    table = Table(box=None, pad_edge=False)
    table.add_column("trace", overflow="fold")
    table.add_column("state", no_wrap=True)
    table.add_column("steps", no_wrap=True)
    table.add_column("MB", justify="right", no_wrap=True)
    table.add_column("created_at", overflow="fold")
    for trace in traces:
        table.add_row(*(Text(safe_text(cell)) for cell in _cells(trace)))
    console.print(table)
    for trace in traces:
        if trace["error"] is not None:
            console.print(Text(safe_text(f"{trace['name']}: {trace['error']}")))
    stopped = [trace for trace in traces if _stopped(trace)]
    if len(stopped) > 1:  # prune always keeps the newest stopped recording
        size = sum(trace["size_bytes"] for trace in stopped) / 1e6
        console.print(
            Text(
                safe_text(
                    f"{len(stopped)} stopped recordings take {size:.2f} MB: stepscope prune "
                    f"{report['path']} --retain SIZE,AGE deletes the oldest"
                )
            )
        )
    console.print(Text(safe_text(f"one of them: stepscope info {report['path']} --trace NAME")))


def _stopped(trace: dict[str, Any]) -> bool:
    """A recording no process writes (one that cannot be read is left out)."""
    return trace["kind"] == "recording" and trace["state"] not in ("recording now", "unreadable")


def _cells(trace: dict[str, Any]) -> list[str]:
    """A trace's row; a recording folder's name ends in `/`, as `ls -F` shows a folder."""
    name = trace["name"] + ("/" if trace["kind"] == "recording" else "")
    state = trace["state"]
    if trace.get("writer_pid") is not None:
        state += f" (pid {trace['writer_pid']})"
    if trace["error"] is not None or not trace["num_steps"]:
        steps = "-" if trace["error"] is not None else "none"
    else:
        steps = f"{trace['first_step']}..{trace['last_step']}"
    created = str(trace.get("created_at") or "-")[:16].replace("T", " ")
    return [name, state, steps, f"{trace['size_bytes'] / 1e6:.2f}", created]
