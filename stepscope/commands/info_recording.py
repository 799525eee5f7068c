"""What `stepscope info` shows of a recording folder: its writer, settings and segments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from stepscope.safe_text import safe_text
from stepscope.schema import Trace
from stepscope.schema.recording_layout import folder_bytes, left_behind, writer_pid
from stepscope.schema.recording_meta import SegmentFacts

SEGMENTS_SHOWN = 20
"""Segments listed in the table at most (the first and last halves); `--json` has all."""
LEFT_BEHIND_NAMED = 4
"""Folders a stopped writer left behind named in one line at most; `--json` has all."""


def recording_report(trace: Trace) -> dict[str, Any]:
    """The recording's part of the report: who writes it now, how, and each segment."""
    recording = trace.recording
    assert recording is not None
    pid = writer_pid(recording.folder)
    segments = [_segment(trace, facts) for facts in recording.segments]
    left = () if pid is not None else left_behind(recording.folder)
    return {
        "writer": _writer(pid, recording.segments),
        "writer_pid": pid,
        "settings": recording.manifest,
        "segments": segments,
        "left_behind": [{"path": str(path), "size_bytes": folder_bytes(path)} for path in left],
    }


def _writer(pid: int | None, segments: tuple[SegmentFacts, ...]) -> str:
    """recording (a process holds its lock), closed, or stopped (it ended without closing).

    A recording closed while its writer was behind ends with a `fell_behind` segment."""
    if pid is not None:
        return "recording"
    last = segments[-1] if segments else None
    closed = last is not None and last.ended_by in ("closed", "fell_behind")
    return "closed" if closed else "stopped"


def _segment(trace: Trace, facts: SegmentFacts) -> dict[str, Any]:
    last, held_last = facts.last_step, trace.held[1]
    if last is None and not facts.closed and held_last >= facts.first_step:
        last = held_last  # the open segment is the last: it holds the last steps
    return {
        "first_step": facts.first_step,
        "last_step": last,
        "closed": facts.closed,
        "num_parts": None if facts.closed else len(facts.folders),
        "size_bytes": sum(folder_bytes(folder) for folder in facts.folders),
        "ended_by": facts.ended_by,
        "opens_with_checkpoint": facts.opens_with_checkpoint,
        "kept": facts.kept,
    }


def writer_line(report: dict[str, Any]) -> str:
    """The recording's state in a few words, as rich markup."""
    recording = report["recording"]
    if recording["writer"] == "recording":
        return f"[bold yellow]being recorded[/] by process {recording['writer_pid']}"
    if recording["writer"] == "stopped":
        return "[bold red]stopped without closing[/] (the recorder killed?)"
    return "closed"


def print_recording(console: Console, report: dict[str, Any]) -> None:
    """The settings, the segments (the first and last when there are many) and the gaps."""
    recording = report["recording"]
    settings = "  ".join(
        f"{_safe(key)} [cyan]{_safe(value)}[/]" for key, value in recording["settings"].items()
    )
    console.print(f"recording  {settings}", highlight=False)
    segments = recording["segments"]
    table = Table(box=None, pad_edge=False, title_justify="left")
    for column in ("steps", "state", "MB", "ended", "opens with"):
        table.add_column(column, justify="right" if column == "MB" else "left")
    half = SEGMENTS_SHOWN // 2
    shown = segments if len(segments) <= SEGMENTS_SHOWN else segments[:half] + segments[-half:]
    for number, segment in enumerate(shown):
        if len(segments) > SEGMENTS_SHOWN and number == half:
            table.add_row(Text(f"… {len(segments) - SEGMENTS_SHOWN} more"), "", "", "", "")
        table.add_row(*_segment_cells(segment))
    console.print(f"segments   {len(segments)}")
    console.print(table)
    if recording["left_behind"]:
        console.print(Text(safe_text(_left_behind_line(recording["left_behind"]))))


def _left_behind_line(left: list[dict[str, Any]]) -> str:
    """What the writer did not live to delete, and that deleting it by hand loses nothing."""
    names = [Path(entry["path"]).name for entry in left]
    shown = ", ".join(names[:LEFT_BEHIND_NAMED]) + (", …" if len(names) > LEFT_BEHIND_NAMED else "")
    size = sum(entry["size_bytes"] for entry in left) / 1e6
    folder = Path(left[0]["path"]).parent
    return (
        f"left behind  {size:.2f} MB in {len(left)} folders its writer stopped before deleting "
        f"(no reader lists them; deleting them loses nothing): {shown}; "
        f"stepscope prune {folder} deletes them"
    )


def _segment_cells(segment: dict[str, Any]) -> tuple[str | Text, ...]:
    last = segment["last_step"]
    steps = f"{segment['first_step']}..{'' if last is None else last}"
    if last is not None and last < segment["first_step"]:
        steps = f"{segment['first_step']}.. (no step)"
    parts = segment["num_parts"]
    state = "closed" if segment["closed"] else f"open, {parts} part{'s' if parts != 1 else ''}"
    if segment["kept"]:
        state += ", kept"
    return (
        Text(steps),
        Text(state),
        f"{segment['size_bytes'] / 1e6:.2f}",
        Text(safe_text(segment["ended_by"] or "")),
        Text("a checkpoint" if segment["opens_with_checkpoint"] else "-"),
    )


def _safe(value: object) -> str:
    return escape(safe_text(str(value)))
