"""Which recording folders a reader reads: paths DuckDB takes literally, and no links.

DuckDB reads a path holding `*`, `?`, `[` or a brace as a pattern, which could match
other files; and a link where a segment or one of its files belongs would read whatever
it points at (or, skipped by the scan, read as if those steps were never recorded).
Either is refused in one line, naming the path.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .recording_layout import STORED_TABLES, Segment, table_file
from .trace_error import TraceError

_GLOB_CHARACTERS = frozenset("*?[]{}")
"""Characters DuckDB reads in a file's path as a pattern."""
_TABLE_FILES = frozenset(table_file(table) for table in STORED_TABLES)


def readable_folder(given: Path) -> Path:
    """The recording's folder, absolute, once DuckDB can read its files by their paths."""
    folder = given.resolve()
    if _GLOB_CHARACTERS & set(str(folder)):
        raise TraceError(
            f"{given}: a recording whose path holds one of {''.join(sorted(_GLOB_CHARACTERS))} "
            "cannot be read (DuckDB takes them as a pattern); rename the folder"
        )
    return folder


def refuse_links(given: Path, folder: Path, segments: Sequence[Segment]) -> None:
    """A link where a segment, a part or a table's file belongs: the scan leaves it out,
    so the recording would read as if it lacked those steps; it is refused instead."""
    places = [folder, *(path for segment in segments for path in _with_parts(segment))]
    for place in places:
        for entry in _entries(place):
            if entry.is_symlink() and _is_recorded(entry.name):
                raise TraceError(
                    f"{given}: {entry} is a link; a recording's segments and files are never "
                    "read through links (copy the recording without them)"
                )


def _with_parts(segment: Segment) -> list[Path]:
    """The segment's folders, and an open one's folder holding its parts."""
    folders = list(segment.folders)
    return folders if segment.closed else [*folders, *{path.parent for path in folders}]


def _is_recorded(name: str) -> bool:
    """A name the recording's scan reads: a segment, a part, or a table's file."""
    return name.startswith(("segment-", "part-")) or name in _TABLE_FILES


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except FileNotFoundError:  # merged or deleted meanwhile: the reader says so when it reads
        return []
