"""Which traces a set of paths names, and what each is called in the `trace` column.

A path is a trace file, a recording folder (one holding `stepscope_recording.json`: one
trace), a folder of trace files and recording folders (searched recursively, never
inside a recording), or a Parquet export folder (one holding `stepscope_export.json`).
A trace's name is its file name without `.duckdb` (a recording's: its folder's name);
traces that share one are named by their path without the suffix, relative to their
folder (or, given themselves, to the deepest folder they share).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .parquet_export import MANIFEST, export_trace_names
from .recording_layout import DELETING_SUFFIX, is_recording
from .recording_layout import MANIFEST as RECORDING_MANIFEST
from .trace_error import TraceError

TRACE_SUFFIX = ".duckdb"
_NAMES_LISTED = 20


@dataclass(frozen=True)
class Member:
    """One trace of a set: its name, and where it is read from."""

    name: str
    path: Path
    """The trace file, the recording folder, or the export folder that holds it."""
    in_export: bool


@dataclass(frozen=True)
class _Found:
    path: Path
    base: Path | None
    """The folder given that holds it (None: the file was given itself)."""


def find_members(paths: Sequence[Path]) -> tuple[Member, ...]:
    """Every trace the paths name, in the order given (a folder's sorted by path)."""
    if not paths:
        raise TraceError("no traces given")
    files: list[_Found] = []
    exported: list[Member] = []
    for path in paths:
        if is_export(path):
            exported.extend(Member(name, path, in_export=True) for name in export_trace_names(path))
        elif is_recording(path):
            files.append(_Found(path, None))
        elif path.is_dir():
            files.extend(_Found(file, path) for file in _trace_files(path))
        elif path.exists():
            files.append(_Found(path, None))
        else:
            raise TraceError(f"{path}: no such file or folder")
    members = [
        Member(name, found.path, in_export=False) for found, name in _named(files)
    ] + exported
    _check_unique(members)
    return tuple(members)


def is_export(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def is_trace_set(path: Path) -> bool:
    """Whether `path` is a folder of traces (not a recording folder, not an export)."""
    return path.is_dir() and not is_recording(path) and not is_export(path)


def find_trace(path: Path, name: str | None) -> Path:
    """The trace (file or recording folder) `path` is, or the one named `name` in the
    folder `path`."""
    if is_export(path):
        raise TraceError(
            f"{path}: a Parquet export, not trace files; query it with: stepscope sql {path} SQL"
        )
    if is_recording(path) or not path.is_dir():
        if name is not None and name != _stem(path):
            raise TraceError(f"{path}: the trace is named {_stem(path)!r}, not {name!r}")
        return path
    members = find_members([path])
    if name is None:
        if len(members) == 1:
            return members[0].path
        raise TraceError(
            f"{path}: a folder of {len(members)} traces; choose one with --trace NAME "
            f"({list_names(members)})"
        )
    for member in members:
        if member.name == name:
            return member.path
    raise TraceError(f"{path}: no trace named {name!r} (its traces: {list_names(members)})")


def not_one_trace(folder: Path) -> str:
    """Why a folder given where one trace is wanted is not one, in one line: the traces it
    holds, as the paths to give instead."""
    if is_export(folder):
        return f"{folder}: a Parquet export, not a trace; query it with: stepscope sql {folder} SQL"
    try:
        members = find_members([folder])
    except TraceError:
        return f"{folder}: is a directory, not a trace"
    paths = _listed([str(member.path) for member in members])
    return f"{folder}: a folder of {len(members)} traces, not one; give one of them: {paths}"


def list_names(members: Iterable[Member]) -> str:
    """The members' names for a one-line message, the first few when there are many."""
    return _listed([member.name for member in members])


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMES_LISTED])
    more = len(names) - _NAMES_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def _trace_files(folder: Path) -> list[Path]:
    traces = traces_in(folder)
    if not traces:
        raise TraceError(
            f"{folder}: no traces in it (no *{TRACE_SUFFIX} files or recording folders, and "
            f"not a Parquet export: no {MANIFEST})"
        )
    return traces


def traces_in(folder: Path) -> list[Path]:
    """The trace files and recording folders under `folder`, by path (never a recording's
    inside)."""
    found = []
    for root, folders, files in os.walk(folder):
        here = Path(root)
        recordings = [name for name in folders if _is_recording_folder(here / name)]
        found += [here / name for name in recordings]
        found += [here / name for name in files if name.endswith(TRACE_SUFFIX)]
        deleting = {name for name in folders if name.endswith(DELETING_SUFFIX)}
        folders[:] = sorted(set(folders) - set(recordings) - deleting)
    return sorted(path for path in found if is_recording(path) or path.is_file())


def _is_recording_folder(path: Path) -> bool:
    """A recording's folder (its manifest inside it), not a link to one, nor one being
    deleted (`stepscope prune` renames a recording to `NAME.deleting` first)."""
    if path.name.endswith(DELETING_SUFFIX) or path.is_symlink():
        return False
    return (path / RECORDING_MANIFEST).is_file()


def _stem(path: Path) -> str:
    """A trace's name: a recording folder's name, a file's without its suffix."""
    return path.name if is_recording(path) else path.stem


def _named(files: list[_Found]) -> list[tuple[_Found, str]]:
    """Each file with its name: the stem, or a relative path where stems collide."""
    by_stem: dict[str, list[_Found]] = defaultdict(list)
    for found in files:
        by_stem[_stem(found.path)].append(found)
    names = {}
    for stem, group in by_stem.items():
        if len(group) == 1:
            names[group[0].path] = stem
            continue
        shared = Path(os.path.commonpath([found.path.parent for found in group]))
        for found in group:
            base = found.base if found.base is not None else shared
            relative = found.path.relative_to(base)
            name = relative if is_recording(found.path) else relative.with_suffix("")
            names[found.path] = name.as_posix()
    return [(found, names[found.path]) for found in files]


def _check_unique(members: list[Member]) -> None:
    seen: dict[str, Member] = {}
    for member in members:
        other = seen.setdefault(member.name, member)
        if other is not member:
            raise TraceError(
                f"two traces named {member.name!r}: {_where(other)} and {_where(member)} "
                "(give each trace once)"
            )


def _where(member: Member) -> str:
    return f"{member.path} (trace={member.name})" if member.in_export else str(member.path)
