"""Which traces a set of paths names, and what each is called in the `trace` column.

A path is a trace file, a folder of trace files (searched recursively), or a Parquet
export folder (one holding `stepscope_export.json`). A trace's name is its file name
without `.duckdb`; traces that share one are named by their path without the suffix,
relative to their folder (or, given as files, to the deepest folder they share).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .parquet_export import MANIFEST, export_trace_names
from .trace_error import TraceError

TRACE_SUFFIX = ".duckdb"
_NAMES_LISTED = 20


@dataclass(frozen=True)
class Member:
    """One trace of a set: its name, and where it is read from."""

    name: str
    path: Path
    """The trace file, or the export folder that holds it."""
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


def find_trace(path: Path, name: str | None) -> Path:
    """The trace file `path` is, or the one named `name` in the folder `path`."""
    if is_export(path):
        raise TraceError(
            f"{path}: a Parquet export, not trace files; query it with: stepscope sql {path} SQL"
        )
    if not path.is_dir():
        if name is not None and name != path.stem:
            raise TraceError(f"{path}: the trace is named {path.stem!r}, not {name!r}")
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


def list_names(members: Iterable[Member]) -> str:
    """The members' names for a one-line message, the first few when there are many."""
    names = [member.name for member in members]
    shown = ", ".join(names[:_NAMES_LISTED])
    more = len(names) - _NAMES_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def _trace_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.rglob(f"*{TRACE_SUFFIX}") if p.is_file())
    if not files:
        raise TraceError(
            f"{folder}: no traces in it (no *{TRACE_SUFFIX} files, and not a Parquet export: "
            f"no {MANIFEST})"
        )
    return files


def _named(files: list[_Found]) -> list[tuple[_Found, str]]:
    """Each file with its name: the stem, or a relative path where stems collide."""
    by_stem: dict[str, list[_Found]] = defaultdict(list)
    for found in files:
        by_stem[found.path.stem].append(found)
    names = {}
    for stem, group in by_stem.items():
        if len(group) == 1:
            names[group[0].path] = stem
            continue
        shared = Path(os.path.commonpath([found.path.parent for found in group]))
        for found in group:
            base = found.base if found.base is not None else shared
            names[found.path] = found.path.relative_to(base).with_suffix("").as_posix()
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
