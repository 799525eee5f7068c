"""Writes Arrow batches into a trace file from a background thread.

The engine hands over a batch and goes on; a bounded queue gives backpressure
(the engine waits only when the disk falls behind, and nothing is dropped). Each
batch is one transaction, so a run killed at any point leaves a trace that
opens with every batch committed before it and says it is incomplete. The
writer folds the write-ahead log into the file every few batches, so that the
`.duckdb` file alone (copied without its `.wal`) holds all but the last few.
A trace closed complete is then compacted (`compact.py`).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from stepscope.schema.sql_files import query
from stepscope.schema.version import SCHEMA_VERSION

from .checkpoint_rows import pending_checkpoint_tables
from .compact import compact
from .empty_trace import create_empty_trace, empty_trace
from .evict_blocks import evict_blocks

QUEUE_DEPTH = 4
CHECKPOINT_EVERY_BATCHES = 8
CHECKPOINT_EVERY_S = 5.0
"""Checkpoint after this many batches or seconds, whichever comes first (wall time paces
writes only; it never touches a decision)."""

_WRITER_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    # One thread: the writer should take as little CPU from the engine as it can.
    "threads": 1,
    # Rows not yet checkpointed stay in memory: a threshold this size bounds them on a
    # long run (a larger one let a recording grow by most of itself) while short runs are
    # still compressed once, on close.
    "checkpoint_threshold": "32MB",
    # On decode-heavy traces, 64 KiB blocks waste less space than the 256 KiB
    # default (partly filled segment blocks) and less than 16 KiB (block metadata).
    "default_block_size": "65536",
    # No vacuum at checkpoints: a batch past a row group leaves a small one behind, and
    # vacuuming merged it with its neighbours, compressing every row a second time
    # (`benchmarks/RESULTS.md`, tracer_overhead).
    # Nothing is deleted while recording, and a complete trace is compacted anyway.
    "max_vacuum_tasks": 0,
}


class TraceWriteError(RuntimeError):
    """The trace could not be written (disk full, permissions, ...)."""


Batch = Mapping[str, Any]
"""Table name to its rows (an Arrow table), or `CHECKPOINTS` to the checkpoints taken."""


@dataclass(frozen=True)
class _MetaUpdate:
    """`_meta` keys to set, in a transaction after the batches before it."""

    meta: Mapping[str, str]
    checkpoint: bool
    """Fold the write-ahead log into the file afterwards."""
    last: bool
    """The writer closes the file after this one."""


REQUEST_ABORTS = "request_aborts"
"""A batch entry that updates `_requests` rows already written (see `request_aborts.sql`)."""
REQUEST_GRAMMARS = "request_grammars"
"""A batch entry that sets `grammar_ready_step` in rows already written (`request_grammars.sql`)."""
_UPDATES = (REQUEST_ABORTS, REQUEST_GRAMMARS)
CHECKPOINTS = "checkpoints"
"""A batch entry of `PendingCheckpoint`s, whose rows are built here, off the engine thread."""


def prepare_new_traces() -> None:
    """Make the empty trace a new one is copied from now, not when the first is created."""
    empty_trace(_WRITER_CONFIG)


class TraceWriter:
    """Owns the DuckDB connection of a trace being recorded."""

    def __init__(self, path: Path, meta: Mapping[str, str], *, compact: bool = True) -> None:
        self.path = path
        self.compact_when_complete = compact
        """Whether a trace closed complete is compacted (a temporary one need not be)."""
        try:
            create_empty_trace(path, _WRITER_CONFIG)
            self._con = duckdb.connect(str(path), config=_WRITER_CONFIG)
            self._set_first_meta(meta)
        except (duckdb.Error, OSError) as error:
            raise TraceWriteError(f"{path}: cannot create trace: {error}") from None
        self._queue: queue.Queue[object] = queue.Queue(maxsize=QUEUE_DEPTH)
        self._error: BaseException | None = None
        self.rows_written = 0
        self._batches_since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        self.write_cpu_s = 0.0
        """CPU time of the writer thread so far: inserts, checkpoints, closing and compacting
        (for the benchmarks)."""
        self._compact = False
        """The last item closed the trace complete: compact the file once it is closed."""
        self.thread = threading.Thread(target=self._run, name="stepscope-trace-writer", daemon=True)
        """The thread that writes (a server's recorder lowers its priority:
        `thread_priority.py`)."""
        self.thread.start()

    def _set_first_meta(self, meta: Mapping[str, str]) -> None:
        con = self._con
        con.begin()
        rows = {"schema_version": str(SCHEMA_VERSION), "complete": "false", **meta}
        con.executemany(query(__package__, "set_meta"), list(rows.items()))
        con.commit()
        con.checkpoint()

    def submit(self, batch: Batch) -> None:
        """Queue a batch for writing; blocks only while the queue is full."""
        self._raise_if_failed()
        self._queue.put(batch)

    def set_meta(self, meta: Mapping[str, str], *, checkpoint: bool = False) -> None:
        """Queue `meta` to be set once the batches queued before it are written."""
        self._raise_if_failed()
        self._queue.put(_MetaUpdate(dict(meta), checkpoint, last=False))

    def close(self, *, complete: bool, final_meta: Mapping[str, str] | None = None) -> None:
        """Write what is queued, mark the trace complete (or not), and close the file."""
        if self.thread.is_alive():
            meta = {**(final_meta or {}), "complete": str(complete).lower()}
            self._queue.put(_MetaUpdate(meta, checkpoint=True, last=True))
            self.thread.join()
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise TraceWriteError(f"{self.path}: writing the trace failed: {self._error}")

    def wait(self) -> None:
        """Block until every batch and mark queued so far is written (or the writer failed)."""
        self._queue.join()
        self._raise_if_failed()

    def _run(self) -> None:
        try:
            while self._handle(self._queue.get()):
                self.write_cpu_s = time.thread_time()
        except BaseException as error:  # surfaced to the engine thread on its next call
            self._error = error
            self._queue.task_done()
            self._drain()
        finally:
            self._close_connection()
        if self._compact and self._error is None:
            compact(self.path, _WRITER_CONFIG)
        self.write_cpu_s = time.thread_time()

    def _handle(self, item: object) -> bool:
        """Write one queued item; False once the file is to be closed."""
        if isinstance(item, _MetaUpdate):
            self._set_meta(item)
        else:
            assert isinstance(item, Mapping)
            self._write(item)
        self._queue.task_done()
        if isinstance(item, _MetaUpdate) and item.last:
            self._compact = self.compact_when_complete and item.meta.get("complete") == "true"
            return False
        return True

    def _write(self, batch: Batch) -> None:
        con = self._con
        if CHECKPOINTS in batch:
            batch = {**batch, **pending_checkpoint_tables(batch[CHECKPOINTS])}
            del batch[CHECKPOINTS]
        con.begin()
        for table, rows in batch.items():
            if table not in _UPDATES:
                # A table's name is an identifier: it is spliced in, not a parameter.
                self._run_with_batch(f"INSERT INTO {table} BY NAME SELECT * FROM _batch", rows)
        for name in _UPDATES:
            if name in batch:
                self._run_with_batch(query(__package__, name), batch[name])
        con.commit()
        self._batches_since_checkpoint += 1
        if (
            self._batches_since_checkpoint >= CHECKPOINT_EVERY_BATCHES
            or time.monotonic() - self._last_checkpoint >= CHECKPOINT_EVERY_S
        ):
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Fold the write-ahead log into the file: the `.duckdb` alone then holds every batch."""
        self._con.checkpoint()
        evict_blocks(self._con)  # else DuckDB keeps them loaded: the file, in memory
        self._batches_since_checkpoint = 0
        self._last_checkpoint = time.monotonic()

    def _run_with_batch(self, sql: str, rows: pa.Table) -> None:
        """Run `sql` with `rows` visible as `_batch`.

        DuckDB finds `_batch` among this frame's local variables (a replacement scan):
        registering the table instead costs more per statement (`benchmarks/RESULTS.md`).
        """
        _batch = rows  # read by the SQL
        self._con.execute(sql)
        self.rows_written += rows.num_rows

    def _set_meta(self, update: _MetaUpdate) -> None:
        con = self._con
        con.begin()
        for key, value in update.meta.items():
            con.execute(query(__package__, "set_meta"), [key, value])
        con.commit()
        if update.checkpoint:
            self._checkpoint()

    def _drain(self) -> None:
        """After a failure, keep taking batches so the engine never blocks on a dead writer."""
        threading.Thread(target=self._discard_forever, daemon=True).start()

    def _discard_forever(self) -> None:
        while True:
            item = self._queue.get()
            self._queue.task_done()
            if isinstance(item, _MetaUpdate) and item.last:
                return

    def _close_connection(self) -> None:
        with contextlib.suppress(duckdb.Error):
            self._con.close()
