"""What `stepscope prune` deletes from a recording folder, or from a folder of recordings.

A writer bounds its own folder (its retention) and deletes what it is done with. Two things
outlive every writer, and nothing else deletes them:

* what a writer stopped before deleting (a kill -9, a crash): the folders
  `recording_layout.left_behind` names. No reader lists them; deleting them loses nothing.
* the recordings of engines that have stopped. A restarted server records into a new
  folder, so `/traces/` grows by one recording per start, each bounded only by its own
  writer's retention, which ended with it.

A plan names what would go and why; carrying it out deletes it. Only a recording no process
writes is touched (its writer's lock is free): a live one is its writer's to bound. The
retention over stopped recordings keeps the folder (everything in it, the live recordings
and trace files too) within a size by deleting stopped recordings oldest first, and deletes
those last written longer ago than an age; the most recently written stopped recording is
always kept, as a writer always keeps its newest segment, so the last crash's recording
survives until a newer one exists. Trace files (`.duckdb`) are never deleted: nothing says
whether a process still writes one without opening it. A server's engine prunes its
directory this way as it starts, where `STEPSCOPE_TRACE_PRUNE` asks it to
(`prune_in_background`): stopped recordings appear only when engines stop, so pruning at
each start bounds them.

A recording is deleted as a writer deletes a segment: renamed to `NAME.deleting` first, so
no reader lists it half-deleted; its manifest goes last, so a deletion cut short is still
one (`stale_deletions`), which the next prune finishes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from stepscope.schema.recording_layout import (
    DELETING_SUFFIX,
    MANIFEST,
    folder_bytes,
    is_recording,
    left_behind,
    writer_pid,
)
from stepscope.schema.set_members import traces_in

from stepscope.quantities import format_duration, format_size

from ..thread_priority import lower_priority
from .settings import Retention

logger = logging.getLogger("stepscope.tracer")

LEFT_BEHIND = "left behind by its writer"
DELETION_CUT_SHORT = "a deletion cut short"


@dataclass(frozen=True)
class Doomed:
    """One folder a plan deletes, and why."""

    path: Path
    reason: str
    size_bytes: int


@dataclass(frozen=True)
class StoppedRecording:
    """A recording no process writes: where, how big, and when it was last written."""

    path: Path
    size_bytes: int
    left_behind_bytes: int
    """Of its bytes, those of what its writer left behind (deleted either way)."""
    last_written: float
    """The newest modification time of a file in it (seconds since the epoch)."""


@dataclass(frozen=True)
class PrunePlan:
    """What a prune of `folder` deletes, with what the folder holds before it."""

    folder: Path
    doomed: tuple[Doomed, ...]
    size_bytes: int
    """Everything under `folder` before the plan is carried out."""
    num_recordings: int
    being_recorded: tuple[Path, ...]
    """Recordings a process writes now: never touched."""

    @property
    def doomed_bytes(self) -> int:
        return sum(doomed.size_bytes for doomed in self.doomed)


def plan_prune(folder: Path, retain: Retention | None, now: float) -> PrunePlan:
    """What pruning `folder` (a recording, or a folder of them) deletes: what stopped writers
    left behind, and with `retain` (a folder of recordings only) the stopped recordings past
    it, judged at `now` (seconds since the epoch)."""
    recordings = [folder] if is_recording(folder) else _recordings_in(folder)
    being_recorded = [path for path in recordings if writer_pid(path) is not None]
    left = {
        path: [Doomed(entry, LEFT_BEHIND, folder_bytes(entry)) for entry in left_behind(path)]
        for path in recordings
        if path not in being_recorded
    }
    stale = [
        Doomed(path, DELETION_CUT_SHORT, folder_bytes(path)) for path in stale_deletions(folder)
    ]
    size_bytes = folder_bytes(folder)
    past: list[Doomed] = []
    if retain is not None:
        stopped = [_stopped(path, left[path]) for path in left]
        remaining = size_bytes - _bytes(stale) - sum(_bytes(entries) for entries in left.values())
        past = _past_retention(stopped, retain, now, remaining)
    gone = {doomed.path for doomed in past}
    doomed = [entry for path, entries in left.items() if path not in gone for entry in entries]
    return PrunePlan(
        folder,
        (*doomed, *stale, *past),
        size_bytes,
        len(recordings),
        tuple(sorted(being_recorded)),
    )


class PruneError(Exception):
    """A folder the plan names could not be deleted (those before it were)."""


def carry_out(plan: PrunePlan) -> None:
    """Delete what `plan` names (what has gone since it was made is passed over); a folder
    that cannot be renamed stops it, as a `PruneError` saying how far it got."""
    for done, doomed in enumerate(plan.doomed):
        try:
            if doomed.reason == LEFT_BEHIND:
                _delete_entry(doomed.path)
            else:
                _delete_recording(doomed.path)
                _remove_empty_parents(doomed.path, plan.folder)
        except OSError as error:
            raise PruneError(
                f"{doomed.path}: cannot delete it ({error.strerror or error}); "
                f"{done} of {len(plan.doomed)} folders were deleted before it"
            ) from None


def prune_in_background(folder: Path, retain: Retention) -> threading.Thread:
    """Prune `folder` past `retain` on a thread of its own, at the lowest CPU priority (a
    server's engine starting beside it comes first). What it deleted is one log line; a
    failure is one too, never raised: the engine it starts with goes on either way."""
    thread = threading.Thread(
        target=_prune_and_log, args=(folder, retain), name="stepscope-prune", daemon=True
    )
    thread.start()
    lower_priority(thread)
    return thread


def _prune_and_log(folder: Path, retain: Retention) -> None:
    try:
        plan = plan_prune(folder, retain, time.time())
        carry_out(plan)
    except Exception as error:
        logger.error("stepscope: pruning %s failed: %s", folder, error)
        return
    if plan.doomed:
        logger.info(
            "stepscope: pruned %s past %s: deleted %d folders of stopped recordings, %.1f MB",
            folder,
            describe(retain),
            len(plan.doomed),
            plan.doomed_bytes / 1e6,
        )


def stale_deletions(folder: Path) -> list[Path]:
    """Recordings a deletion was cut short in (renamed, their manifest still in them)."""
    if folder.name.endswith(DELETING_SUFFIX) or is_recording(folder):
        return []  # a recording's own leftovers are `left_behind`'s
    found = []
    for root, folders, _ in os.walk(folder):
        here = Path(root)
        for name in list(folders):
            path = here / name
            if name.endswith(DELETING_SUFFIX) and (path / MANIFEST).is_file():
                folders.remove(name)
                found.append(path)
            elif is_recording(path):
                folders.remove(name)  # a recording's own leftovers are `left_behind`'s
    return sorted(found)


def _recordings_in(folder: Path) -> list[Path]:
    return [path for path in traces_in(folder) if path.is_dir()]


def _stopped(path: Path, left: list[Doomed]) -> StoppedRecording:
    """The recording's bytes, and the newest modification time of a file in it (a folder's
    own changes when something in it is deleted, by a prune too), in one walk."""
    size_bytes, newest = 0, None
    for root, _, files in os.walk(path):
        for name in files:
            try:
                stat = os.lstat(os.path.join(root, name))
            except FileNotFoundError:
                continue
            size_bytes += stat.st_size
            newest = stat.st_mtime if newest is None else max(newest, stat.st_mtime)
    if newest is None:  # no file in it: when the folder itself last changed
        newest = _mtime(path)
    return StoppedRecording(path, size_bytes, _bytes(left), newest)


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except FileNotFoundError:
        return 0.0


def _past_retention(
    stopped: list[StoppedRecording], retain: Retention, now: float, size_bytes: int
) -> list[Doomed]:
    """Stopped recordings older than the age, then the oldest while the folder (of
    `size_bytes` once the plan's other deletions are done) holds more than the size; never
    the most recently written."""
    oldest_first = sorted(stopped, key=lambda recording: (recording.last_written, recording.path))
    by_path = {recording.path: recording for recording in stopped}
    doomed: list[Doomed] = []
    for recording in oldest_first[:-1]:
        remaining = size_bytes - sum(
            gone.size_bytes - by_path[gone.path].left_behind_bytes for gone in doomed
        )
        reason = _why_past(recording, retain, now, remaining)
        if reason is not None:
            doomed.append(Doomed(recording.path, reason, recording.size_bytes))
    return doomed


def _why_past(
    recording: StoppedRecording, retain: Retention, now: float, size_bytes: int
) -> str | None:
    if retain.max_age_s is not None and now - recording.last_written > retain.max_age_s:
        return f"last written more than {format_duration(retain.max_age_s)} ago"
    if retain.max_bytes is not None and size_bytes > retain.max_bytes:
        return f"the folder holds more than {format_size(retain.max_bytes)}"
    return None


def describe(retain: Retention) -> str:
    """The retention as `--retain` takes it (`20GB,7d`)."""
    bounds = [] if retain.max_bytes is None else [format_size(retain.max_bytes)]
    return ",".join(
        bounds + ([] if retain.max_age_s is None else [format_duration(retain.max_age_s)])
    )


def _bytes(doomed: list[Doomed]) -> int:
    return sum(entry.size_bytes for entry in doomed)


def _delete_recording(path: Path) -> None:
    """Rename the recording out of every listing, delete all but its manifest, then that."""
    doomed = (
        path if path.name.endswith(DELETING_SUFFIX) else path.with_name(path.name + DELETING_SUFFIX)
    )
    if doomed != path:
        try:
            os.replace(path, doomed)
        except FileNotFoundError:
            return
    for entry in _entries(doomed):
        if entry.name != MANIFEST:
            _delete_entry(entry)
    with contextlib.suppress(FileNotFoundError):
        (doomed / MANIFEST).unlink()
    with contextlib.suppress(OSError):
        doomed.rmdir()


def _delete_entry(path: Path) -> None:
    """A folder the way a writer deletes one (renamed first), or a file."""
    if path.is_dir() and not path.is_symlink():
        doomed = (
            path
            if path.name.endswith(DELETING_SUFFIX)
            else path.with_name(path.name + DELETING_SUFFIX)
        )
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _remove_empty_parents(path: Path, top: Path) -> None:
    """A data-parallel server's folder (`vllm-{id}/rank{R}/`) goes once its last rank has."""
    parent = path.parent
    while parent != top and top in parent.parents:
        try:
            parent.rmdir()
        except OSError:
            return
        parent = parent.parent


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except FileNotFoundError:
        return []
