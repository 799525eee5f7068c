"""A DuckDB error met while a recording's files were read, said in a user's terms.

A file that went away since the folder was scanned means the recording changed under
the reader (its writer merged the open segment's parts, or retention deleted the oldest
segment): run the command again. A file DuckDB cannot read as Parquet is damaged, and
named.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import duckdb

from .trace_error import RecordingChangedError, TraceDamagedError, TraceError
from .trace_file import first_line, is_file_error

_VANISHED = ("No files found that match", "No such file or directory", "Cannot open file")
"""What DuckDB says of a file that is not there."""
_QUOTED_PATH = re.compile(r"\"([^\"]+)\"|'([^']+)'")


def recording_error(error: duckdb.Error, folders: Sequence[Path]) -> TraceError | None:
    """What `error` means for the recordings in `folders` (None: it names none of their
    files, so it is not about them)."""
    line = first_line(error)
    named = _named_file(line, folders)
    if named is None:
        return None
    folder = next(folder for folder in folders if named.is_relative_to(folder))
    if any(text in line for text in _VANISHED) and not named.exists():
        return RecordingChangedError(changed(folder, named), str(error).strip())
    if is_file_error(error) or isinstance(error, duckdb.InvalidInputException):
        return TraceDamagedError(
            f"{named}: a damaged file of the recording {folder}, it cannot be read ({line})",
            str(error).strip(),
        )
    return None


def changed(folder: Path, vanished: Path) -> str:
    return (
        f"{folder}: the recording changed while it was read ({vanished.relative_to(folder)} "
        "went away: its writer closed a segment, or deleted the oldest); run the command again"
    )


def _named_file(line: str, folders: Sequence[Path]) -> Path | None:
    """The first path quoted in `line` that lies in one of `folders`."""
    for match in _QUOTED_PATH.finditer(line):
        path = Path(match.group(1) or match.group(2))
        if path.is_absolute() and any(path.is_relative_to(folder) for folder in folders):
            return path
    return None
