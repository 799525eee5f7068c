"""A recording on disk: a folder of segments, each a set of Parquet files, one per table.

    DIR/
      stepscope_recording.json        what the folder is: its format, and how it was recorded
      .writer.lock                    held (flock) by the process recording into it, if any
      segment-000000000000/           a closed segment, named by its first step: immutable
        steps.parquet  scheduled.parquet  requests.parquet  meta.parquet  ...
      segment-000000005000.open/      the open segment: the steps written so far, in parts
        part-000000/  part-000001/    one per flush, each whole steps, renamed into place
        part-000002.tmp/              a part being written (never read)
      segment-000000005000.closing/   the open segment being merged into its closed form

A closed segment retention chose holds an empty `.expired` file: no scan lists it from then
on, and its writer deletes it a grace period later (readers that listed it finish first;
after a kill -9 it stays, unlisted, as do the other folders `left_behind` names).

A segment starts with a checkpoint (its first step's state) and holds the `_requests` rows
of every request unfinished there, so each replays on its own. A part and a closed
segment hold the same files; `request_aborts.parquet` holds the aborts of requests whose
row was written earlier and `request_grammars.parquet` the steps their grammars became ready
at (the reader applies both), `meta.parquet` key/value facts in the
order they were set (the last value of a key is its value). What is listed here is only
names and the scan of a folder: the writer (`stepscope.tracer`) and the readers share it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .ddl import logical_tables

MANIFEST = "stepscope_recording.json"
RECORDING_FORMAT = 2
"""Bumped when a reader must know about a change to this layout (not to the tables).

1: the first layout.
2: `request_grammars` files (a reader of 1 would take a grammar's readiness learned after
   its request's row was written as unknown).
"""
READABLE_FORMATS = frozenset({1, RECORDING_FORMAT})
"""The formats this stepscope reads (a format-1 folder has no `request_grammars` files)."""
LOCK = ".writer.lock"
REQUEST_ABORTS = "request_aborts"
"""The stored table of aborts that update `_requests` rows written before them."""
REQUEST_GRAMMARS = "request_grammars"
"""The stored table of grammar-ready steps that update `_requests` rows written before them."""
TEMPORARY_SUFFIX = ".tmp"
OPEN_SUFFIX = ".open"
CLOSING_SUFFIX = ".closing"
EXPIRED = ".expired"
"""In a closed segment retention chose: the segment is no longer part of the recording."""
DELETING_SUFFIX = ".deleting"
"""A folder the writer is deleting: renamed first, so no reader lists it half-deleted."""

_SEGMENT = re.compile(r"segment-(\d{12})(\.open)?")
_PART = re.compile(r"part-(\d{6})")


def segment_name(first_step: int, *, is_open: bool = False) -> str:
    return f"segment-{first_step:012d}" + (OPEN_SUFFIX if is_open else "")


def part_name(number: int) -> str:
    return f"part-{number:06d}"


def table_file(table: str) -> str:
    """The file of `table` (a logical `_name`, or a stored update's) in a part or segment."""
    return table.removeprefix("_") + ".parquet"


STORED_TABLES = (*logical_tables(), REQUEST_ABORTS, REQUEST_GRAMMARS)
"""Every table a part or segment may hold a file of."""


def is_recording(path: Path) -> bool:
    """Whether `path` is a recording folder (it holds the manifest)."""
    return (path / MANIFEST).is_file()


def write_manifest(folder: Path, settings: dict[str, Any]) -> None:
    """The folder's manifest, written whole (a temporary file renamed over it)."""
    document = {"recording_format": RECORDING_FORMAT, **settings}
    scratch = folder / (MANIFEST + TEMPORARY_SUFFIX)
    scratch.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    os.replace(scratch, folder / MANIFEST)


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest's settings; a ValueError naming the file when it is not one this reads."""
    path = folder / MANIFEST
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a readable recording manifest ({error})") from None
    version = document.get("recording_format") if isinstance(document, dict) else None
    if version not in READABLE_FORMATS or isinstance(version, bool):
        readable = " and ".join(map(str, sorted(READABLE_FORMATS)))
        raise ValueError(
            f"{path}: recording format {version!r} is not one this stepscope reads "
            f"(it reads {readable})"
        )
    assert isinstance(document, dict)
    return document


@dataclass(frozen=True)
class Segment:
    """One segment as found on disk: its first step, and the folders holding its files."""

    first_step: int
    closed: bool
    folders: tuple[Path, ...]
    """The closed segment's folder, or the open one's parts in order."""

    def files(self, table: str) -> list[Path]:
        """The files of `table` in this segment, in order (none when it has no rows)."""
        name = table_file(table)
        return [folder / name for folder in self.folders if _regular(folder / name)]


def holds_a_step(segments: Sequence[Segment]) -> bool:
    """Whether any of a recording's segments (`scan`) holds a step."""
    return any(segment.files("_steps") for segment in segments)


def scan(folder: Path) -> tuple[Segment, ...]:
    """The recording's segments by first step: a closed one where it exists, else the open
    one's parts written so far. Folders being written or merged are never listed."""
    closed: dict[int, Path] = {}
    expired: set[int] = set()
    open_: dict[int, Path] = {}
    for entry in _entries(folder):
        match = _SEGMENT.fullmatch(entry.name)
        if match is None or entry.is_symlink() or not entry.is_dir():
            continue
        step = int(match.group(1))
        if match.group(2):
            open_[step] = entry
        elif (entry / EXPIRED).exists():
            expired.add(step)
        else:
            closed[step] = entry
    segments = [Segment(step, closed=True, folders=(path,)) for step, path in closed.items()]
    segments += [  # an open folder whose segment closed is the writer's to delete
        Segment(step, closed=False, folders=_parts(path))
        for step, path in open_.items()
        if step not in closed and step not in expired
    ]
    return tuple(sorted(segments, key=lambda segment: segment.first_step))


def left_behind(folder: Path) -> tuple[Path, ...]:
    """What the writer had still to delete when it stopped, which no scan lists: segments
    retention chose, open segments already merged, a merge or a deletion cut short, a part
    cut short. A writer deletes these itself; one killed leaves them for good."""
    entries = _entries(folder)
    closed = {
        match.group(1)
        for entry in entries
        if (match := _SEGMENT.fullmatch(entry.name)) is not None and not match.group(2)
    }
    left: list[Path] = []
    for entry in entries:
        if not entry.is_symlink() and entry.is_dir():
            left += _left_in(entry, closed)
    return tuple(sorted(left))


def _left_in(entry: Path, closed: set[str]) -> list[Path]:
    """`entry` when the writer was to delete it whole; else the parts cut short in it."""
    if entry.name.endswith((CLOSING_SUFFIX, DELETING_SUFFIX)):
        return [entry]
    match = _SEGMENT.fullmatch(entry.name)
    if match is None:
        return []
    if not match.group(2):
        return [entry] if (entry / EXPIRED).exists() else []
    if match.group(1) in closed:
        return [entry]  # merged: the closed segment (or retention's choice of it) holds it
    return [part for part in _entries(entry) if part.name.endswith(TEMPORARY_SUFFIX)]


def _parts(folder: Path) -> tuple[Path, ...]:
    parts = [
        entry
        for entry in _entries(folder)
        if _PART.fullmatch(entry.name) and not entry.is_symlink() and entry.is_dir()
    ]
    return tuple(sorted(parts, key=lambda part: part.name))


def _entries(folder: Path) -> list[Path]:
    """The folder's entries; none when it went away while being read (a merged open segment)."""
    try:
        return list(folder.iterdir())
    except FileNotFoundError:
        return []


def _regular(path: Path) -> bool:
    """A plain file, not a link: a recording someone else made cannot point a reader elsewhere."""
    return not path.is_symlink() and path.is_file()


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under `folder` (those that vanish while it is summed count 0)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def writer_pid(folder: Path) -> int | None:
    """The process recording into `folder` now (None: none is).

    The writer writes its pid into `.writer.lock`, then holds an exclusive lock on it; a
    shared lock taken without waiting tells whether it still does.
    """
    path = folder / LOCK
    try:
        handle = path.open("r", encoding="ascii")
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = handle.read().strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None
