"""Writes a recording as a folder of segments from a background thread.

The recorder hands over batches as it does to `TraceWriter`; each becomes a part of the
open segment, its files written under a temporary name and renamed into place, so a
reader sees whole steps only and a process killed at any point loses at most the batch
being written. Closing a segment merges its parts into its closed, compact form (renamed
into place whole), then the retention rule deletes the oldest closed segments. What the
writer no longer needs (the merged parts, a segment retention chose) is deleted
`READER_GRACE_S` later: a reader that listed it can finish.

A failure (a full disk, a folder that cannot be written) stops the writer: it is raised
on the engine's next call, as `TraceWriteError`, and every segment and part written
before it stays readable.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import logging
import os
import queue
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pyarrow as pa
from stepscope.schema import TraceError
from stepscope.schema.recording_layout import (
    CLOSING_SUFFIX,
    DELETING_SUFFIX,
    EXPIRED,
    LOCK,
    TEMPORARY_SUFFIX,
    folder_bytes,
    part_name,
    segment_name,
    table_file,
    write_manifest,
)
from stepscope.schema.version import SCHEMA_VERSION

from ..checkpoint_rows import pending_checkpoint_tables
from ..writer import CHECKPOINTS, QUEUE_DEPTH, Batch, TraceWriteError
from .keep import segment_matches
from .parquet_files import file_schema, read_file, write_part_file, write_segment_file
from .settings import SegmentSettings

logger = logging.getLogger("stepscope.tracer")

READER_GRACE_S = 30.0
"""How long a folder the writer is done with stays before it is deleted: a reader that
listed it (a snapshot, a query, a TUI following the recording) can read it to the end."""
IDLE_WAKE_S = 1.0
"""How often an idle writer wakes to delete what is due."""
_META_SCHEMA = pa.schema([("key", pa.string()), ("value", pa.string())])


@dataclass(frozen=True)
class _Meta:
    meta: Mapping[str, str]


@dataclass(frozen=True)
class _Open:
    first_step: int
    starts_with_checkpoint: bool


@dataclass(frozen=True)
class _End:
    ended_by: str
    """rotated, fell_behind (steps were dropped after it) or closed (the recording ended)."""


@dataclass(frozen=True)
class _Close:
    meta: Mapping[str, str]
    ended_by: str


@dataclass(frozen=True)
class _ClosedSegment:
    folder: Path
    num_bytes: int
    closed_at: float
    """Wall clock (seconds since the epoch) when it closed."""
    kept: bool = False
    """A step in it met the keep rule: retention spares it (up to the rule's own bound)."""
    holds_steps: bool = True
    """False: it closed before its first step (a stop right after it opened)."""


class SegmentWriter:
    """Owns a recording folder: its manifest, its lock, and the open segment."""

    def __init__(self, folder: Path, meta: Mapping[str, str], settings: SegmentSettings) -> None:
        self.path = folder
        self.settings = settings
        self.rows_written = 0
        self.write_cpu_s = 0.0
        """CPU time of the writer thread so far: parts, merges and retention."""
        self._lock_file = _create_folder(folder, settings)
        self._meta: dict[str, str] = {
            "schema_version": str(SCHEMA_VERSION),
            "complete": "false",
            **meta,
        }
        """Every `_meta` key set so far, in the order set: each segment's meta starts so."""
        self._pending_meta: dict[str, str] = dict(self._meta)
        self._config: pa.Table | None = None
        self._open: Path | None = None
        self._first_step = 0
        self._last_step: int | None = None
        """The last step written into the open segment (None: none yet)."""
        self._num_parts = 0
        self._open_bytes = 0
        self._doomed: deque[tuple[float, Path]] = deque()
        """Folders to delete, each with when (monotonic), oldest first."""
        self._closed: deque[_ClosedSegment] = deque()
        self._keep_failed = False
        """The keep rule failed once (said once; it keeps nothing from then on)."""
        self._queue: queue.Queue[object] = queue.Queue(maxsize=QUEUE_DEPTH)
        self._error: BaseException | None = None
        self.thread = threading.Thread(
            target=self._run, name="stepscope-segment-writer", daemon=True
        )
        """The thread that writes (a server's recorder lowers its priority:
        `thread_priority.py`)."""
        self.thread.start()

    # ----- the recorder's calls ------------------------------------------------

    def submit(self, batch: Batch) -> None:
        """Queue a batch (rows of whole steps) for the open segment; blocks only while full."""
        self._put(batch)

    def set_meta(self, meta: Mapping[str, str], *, checkpoint: bool = False) -> None:
        """Queue `meta`; it is written at once, after the batches queued before it."""
        del checkpoint  # every meta update is written at once: a part of its own
        self._put(_Meta(dict(meta)))

    def open_segment(self, first_step: int, *, starts_with_checkpoint: bool) -> None:
        """Start a segment whose first step is `first_step` (the last one must have ended)."""
        self._put(_Open(first_step, starts_with_checkpoint))

    def end_segment(self, ended_by: str) -> None:
        """Close the open segment (none open: nothing to do)."""
        self._put(_End(ended_by))

    def close(
        self,
        *,
        complete: bool,
        final_meta: Mapping[str, str] | None = None,
        ended_by: str = "closed",
    ) -> None:
        """Write what is queued, close the open segment (as `ended_by`: `fell_behind` when
        the steps after it were dropped), and let the folder go."""
        if self.thread.is_alive():
            meta = {**(final_meta or {}), "complete": str(complete).lower()}
            self._queue.put(_Close(meta, ended_by))
            self.thread.join()
        self._raise_if_failed()

    def wait(self) -> None:
        """Block until everything queued so far is written (or the writer failed)."""
        self._queue.join()
        self._raise_if_failed()

    def _put(self, item: object) -> None:
        self._raise_if_failed()
        self._queue.put(item)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise TraceWriteError(f"{self.path}: writing the recording failed: {self._error}")

    # ----- the writer thread ------------------------------------------------------

    def _run(self) -> None:
        try:
            while self._handle(self._next_item()):
                self._delete_due()
                self.write_cpu_s = time.thread_time()
        except BaseException as error:  # raised on the engine thread at its next call
            self._error = error
            self._drain()
        finally:
            self.write_cpu_s = time.thread_time()
            self._release_lock()

    def _next_item(self) -> object:
        """The next queued item; while none comes, what is due is deleted."""
        while True:
            try:
                return self._queue.get(timeout=IDLE_WAKE_S)
            except queue.Empty:
                self._delete_due()

    def _handle(self, item: object) -> bool:
        """Carry out one queued item; False once the folder is let go."""
        try:
            if isinstance(item, _Meta):
                self._meta.update(item.meta)
                self._pending_meta.update(item.meta)
                if self._open is not None:
                    self._write_part({})
            elif isinstance(item, _Open):
                self._open_segment(item)
            elif isinstance(item, _End):
                self._end_segment(item)
            elif isinstance(item, _Close):
                self._close(item)
                return False
            else:
                assert isinstance(item, Mapping)
                self._write_batch(item)
            return True
        finally:
            self._queue.task_done()

    def _write_batch(self, batch: Batch) -> None:
        tables = dict(batch)
        config = tables.pop("_config", None)
        if config is not None:
            self._config = config
        if CHECKPOINTS in tables:
            tables.update(pending_checkpoint_tables(tables.pop(CHECKPOINTS)))
        if not tables:
            return
        if self._open is None:
            raise RuntimeError(f"rows of {', '.join(sorted(tables))} while no segment is open")
        self._write_part(tables)

    def _open_segment(self, item: _Open) -> None:
        assert self._open is None, "a segment is open already"
        self._first_step = item.first_step
        self._open = self.path / segment_name(item.first_step, is_open=True)
        self._open.mkdir()
        self._last_step = None
        self._num_parts = 0
        self._open_bytes = 0
        self._pending_meta = {
            **self._meta,
            "segment_first_step": str(item.first_step),
            "segment_checkpoint": str(item.starts_with_checkpoint).lower(),
        }
        first = {} if self._config is None else {"_config": self._config}
        self._write_part(first)

    def _write_part(self, tables: Mapping[str, pa.Table]) -> None:
        """The tables, and the meta set since the last part, as the open segment's next part."""
        assert self._open is not None
        if self._pending_meta:
            tables = {**tables, "_meta": _meta_table(self._pending_meta)}
            self._pending_meta = {}
        final = self._open / part_name(self._num_parts)
        scratch = final.with_name(final.name + TEMPORARY_SUFFIX)
        try:
            scratch.mkdir()
            for name, rows in tables.items():
                write_part_file(rows, scratch / table_file(name))
                if name != "_meta":
                    self.rows_written += rows.num_rows
            os.replace(scratch, final)
            if "_steps" in tables:
                self._last_step = tables["_steps"]["step"][-1].as_py()
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        self._num_parts += 1
        self._open_bytes += folder_bytes(final)

    def _end_segment(self, item: _End) -> None:
        if self._open is None:
            return
        last = self._first_step - 1 if self._last_step is None else self._last_step
        facts = {
            "segment_last_step": str(last),
            "segment_end": item.ended_by,
            "segment_closed_at": _now_iso(),
        }
        self._merge(self._open, facts, holds_steps=self._last_step is not None)
        self._open = None
        self._open_bytes = 0
        self._apply_retention()

    def _merge(self, open_folder: Path, facts: Mapping[str, str], *, holds_steps: bool) -> None:
        """The open segment's parts as one closed segment, renamed into place whole."""
        closing = self.path / (segment_name(self._first_step) + CLOSING_SUFFIX)
        shutil.rmtree(closing, ignore_errors=True)
        closing.mkdir()
        parts = sorted(p for p in open_folder.iterdir() if not p.name.endswith(TEMPORARY_SUFFIX))
        kept = self._meets_keep_rule(parts)
        if kept is not None:
            facts = {**facts, "segment_kept": str(kept).lower()}
        for file_name in sorted({f.name for part in parts for f in part.iterdir()}):
            files = [part / file_name for part in parts if (part / file_name).is_file()]
            if file_name == table_file("_meta"):
                rows = _meta_table({**dict(self._segment_meta(files)), **facts})
                write_segment_file("_meta", _META_SCHEMA, _reader([], [rows]), closing / file_name)
                continue
            name = "_" + file_name.removesuffix(".parquet")
            write_segment_file(name, file_schema(files[0]), _reader(files), closing / file_name)
        closed = self.path / segment_name(self._first_step)
        os.replace(closing, closed)
        self._doom(open_folder)
        self._closed.append(
            _ClosedSegment(closed, folder_bytes(closed), time.time(), bool(kept), holds_steps)
        )

    def _meets_keep_rule(self, parts: list[Path]) -> bool | None:
        """Whether a step of the parts meets the keep rule (None: there is none)."""
        keep = self.settings.keep
        if keep is None:
            return None
        if self._keep_failed:
            return False
        steps = [part / table_file("_steps") for part in parts]
        try:
            return segment_matches(keep.condition, [path for path in steps if path.is_file()])
        except TraceError as error:  # it bound at the start, yet a value can fail (a cast)
            self._keep_failed = True
            logger.error(
                "stepscope: the keep rule %r failed on the segment at step %d (%s); from here "
                "on it keeps no segment, and recording goes on",
                keep.condition,
                self._first_step,
                error,
            )
            return False

    @staticmethod
    def _segment_meta(files: list[Path]) -> list[tuple[str, str]]:
        """The segment's meta as its parts set it, the last value of each key kept."""
        meta: dict[str, str] = {}
        for path in files:
            for row in read_file(path).to_pylist():
                meta[row["key"]] = row["value"]
        return list(meta.items())

    def _apply_retention(self) -> None:
        """Delete the oldest closed segments past the size or age bound, and the oldest kept
        ones past the keep rule's bound (never the newest closed segment, nor the newest that
        holds a step)."""
        retain, keep = self.settings.retain, self.settings.keep
        now = time.time()
        while (oldest := self._oldest(kept=False)) is not None:
            total = sum(s.num_bytes for s in self._closed if not s.kept) + self._open_bytes
            too_big = retain.max_bytes is not None and total > retain.max_bytes
            too_old = retain.max_age_s is not None and now - oldest.closed_at > retain.max_age_s
            if not (too_big or too_old):
                break
            self._expire(oldest)
        while keep is not None and keep.max_bytes is not None:
            oldest = self._oldest(kept=True)
            kept_bytes = sum(s.num_bytes for s in self._closed if s.kept)
            if oldest is None or kept_bytes <= keep.max_bytes:
                break
            self._expire(oldest)

    def _oldest(self, *, kept: bool) -> _ClosedSegment | None:
        """The oldest closed segment, kept or not, other than the newest and the newest that
        holds a step (a recording stopped as a segment opened keeps its last steps)."""
        closed = list(self._closed)
        spared = {len(closed) - 1}
        spared.add(next((i for i in reversed(range(len(closed))) if closed[i].holds_steps), -1))
        return next((s for i, s in enumerate(closed) if s.kept == kept and i not in spared), None)

    def _expire(self, segment: _ClosedSegment) -> None:
        self._closed.remove(segment)
        with contextlib.suppress(OSError):  # else listed until deleted: no harm
            (segment.folder / EXPIRED).touch()  # readers stop listing it now
        self._doom(segment.folder)

    def _doom(self, folder: Path) -> None:
        self._doomed.append((time.monotonic() + READER_GRACE_S, folder))

    def _delete_due(self, *, everything: bool = False) -> None:
        doomed = self._doomed
        now = time.monotonic()
        while doomed and (everything or doomed[0][0] <= now):
            self._delete(doomed.popleft()[1])

    def _delete(self, folder: Path) -> None:
        """Remove `folder`: renamed first, so a reader never lists it half-deleted."""
        doomed = folder.with_name(folder.name + DELETING_SUFFIX)
        with contextlib.suppress(FileNotFoundError):
            os.replace(folder, doomed)
        shutil.rmtree(doomed, ignore_errors=True)

    def _close(self, item: _Close) -> None:
        self._meta.update(item.meta)
        self._pending_meta.update(item.meta)
        if self._open is not None:
            self._write_part({})
            self._end_segment(_End(item.ended_by))
        self._delete_due(everything=True)  # the recording is done: nothing waits on it

    def _drain(self) -> None:
        """After a failure, take what is queued without writing, so no caller waits."""
        threading.Thread(target=self._discard_forever, daemon=True).start()

    def _discard_forever(self) -> None:
        while True:
            item = self._queue.get()
            self._queue.task_done()
            if isinstance(item, _Close):
                return

    def _release_lock(self) -> None:
        with contextlib.suppress(OSError):
            (self.path / LOCK).unlink()
        with contextlib.suppress(OSError):
            self._lock_file.close()


def _create_folder(folder: Path, settings: SegmentSettings) -> IO[str]:
    """Make the recording folder (new, or empty), its manifest, and the writer's lock."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if any(folder.iterdir()):
            raise TraceWriteError(f"{folder}: already exists and is not empty")
        lock = (folder / LOCK).open("w", encoding="ascii")
        lock.write(str(os.getpid()))
        lock.flush()
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        write_manifest(
            folder,
            {
                "created_at": _now_iso(),
                "segment": str(settings.every),
                "retain": str(settings.retain),
                **({} if settings.keep is None else {"keep": str(settings.keep)}),
            },
        )
    except OSError as error:
        raise TraceWriteError(f"{folder}: cannot create the recording: {error}") from None
    return lock


def _reader(
    files: list[Path], tables: list[pa.Table] | None = None
) -> Callable[[], Iterator[pa.Table]]:
    """The files' rows (or `tables`), a file at a time, read afresh at each call."""
    if tables is not None:
        return lambda: iter(tables)
    return lambda: (read_file(path) for path in files)


def _meta_table(meta: Mapping[str, str]) -> pa.Table:
    return pa.table(
        {
            "key": pa.array(list(meta), pa.string()),
            "value": pa.array(list(meta.values()), pa.string()),
        }
    )


def _now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
