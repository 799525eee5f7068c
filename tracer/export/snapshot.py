"""A window of a trace as one self-contained trace file, as a flight recorder's dump is.

The window's steps are widened back to the checkpoint at or before its first one (or to
step 0, whose state is empty), so the file replays exactly on its own: it holds that
checkpoint, every step from it to the window's last, and the `_requests` rows of every
request those steps or the checkpoint name. It reads any trace a reader opens, a
recording being written included, and is written under a temporary name and renamed into
place: a stop or a failure leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from stepscope.schema import Trace, TraceError, open_trace
from stepscope.schema.ddl import table_specs
from stepscope.schema.sql_files import query

from ..held_signals import signals_held
from ..writer import TraceWriter

_BATCH_ROWS = 1 << 17
_NOT_COPIED = ("schema_version", "complete", "num_steps")
"""`_meta` keys the snapshot sets itself."""


@dataclass(frozen=True)
class SnapshotWindow:
    """The steps asked for: the last `last_steps`, or those that ended within the last
    `last_seconds`, or `from_step` to `to_step` (None: to the end); `to_step` ends the
    first two too."""

    from_step: int | None = None
    to_step: int | None = None
    last_steps: int | None = None
    last_seconds: float | None = None


@dataclass(frozen=True)
class Snapshot:
    """What a snapshot wrote: its steps, from the checkpoint the window was widened to."""

    path: Path
    first_step: int
    asked_from_step: int
    last_step: int
    num_requests: int


def snapshot(trace_path: Path, out: Path, window: SnapshotWindow) -> Snapshot:
    """Write the window of the trace at `trace_path` into the new trace file `out`."""
    with open_trace(trace_path) as trace:
        first, last = _bounds(trace, window)
        start = _checkpoint_at_or_before(trace, first)
        meta = _snapshot_meta(trace, trace_path, start, first, last)
        ends_the_run = trace.complete and last == trace.last_step
        num_requests = _write(trace, out, meta, start, last, complete=ends_the_run)
    return Snapshot(out, start, first, last, num_requests)


def _bounds(trace: Trace, window: SnapshotWindow) -> tuple[int, int]:
    """The window's first and last step, each a one-line error when the trace lacks it."""
    ((first_step, last_step),) = trace.execute(query(__package__, "snapshot_bounds")).fetchall()
    if last_step is None:
        raise TraceError(f"{trace.path}: no steps recorded yet")
    last = last_step if window.to_step is None else window.to_step
    if not first_step <= last <= last_step:
        raise TraceError(f"--to-step {last}: {trace.path} has steps {first_step}..{last_step}")
    if window.last_steps is not None:
        first = max(first_step, last - window.last_steps + 1)
    elif window.last_seconds is not None:
        first = _since(trace, last, window.last_seconds)
    else:
        first = first_step if window.from_step is None else window.from_step
    if not first_step <= first <= last:
        raise TraceError(f"--from-step {first}: {trace.path} has steps {first_step}..{last}")
    return first, last


def _since(trace: Trace, last: int, seconds: float) -> int:
    span_ns = int(seconds * 1e9)
    ((step,),) = trace.execute(query(__package__, "snapshot_since"), [last, span_ns]).fetchall()
    if step is None:
        raise TraceError(
            f"{trace.path}: its steps hold no wall clock (recorded before schema 8); "
            "choose the window in steps (--last-steps N, or --from-step)"
        )
    return int(step)


def _checkpoint_at_or_before(trace: Trace, step: int) -> int:
    """Where a replay of the window can start: the latest checkpoint at or before `step`,
    or step 0 (whose state is empty) in a trace that begins there."""
    ((checkpoint,),) = trace.execute(query(__package__, "snapshot_checkpoint"), [step]).fetchall()
    if checkpoint is not None:
        return int(checkpoint)
    ((first_step, _),) = trace.execute(query(__package__, "snapshot_bounds")).fetchall()
    if first_step == 0:
        return 0
    raise TraceError(
        f"{trace.path}: no checkpoint at or before step {step} (its first is later), so no "
        "snapshot from there replays; start the window at a later step"
    )


def _snapshot_meta(trace: Trace, source: Path, start: int, first: int, last: int) -> dict[str, str]:
    copied = {key: value for key, value in trace.meta.items() if key not in _NOT_COPIED}
    return {
        **copied,
        "snapshot_of": str(source),
        "snapshot_from_step": str(start),
        "snapshot_asked_from_step": str(first),
        "snapshot_to_step": str(last),
        "snapshot_taken_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def _write(
    trace: Trace, out: Path, meta: dict[str, str], start: int, last: int, *, complete: bool
) -> int:
    """The rows into a new trace at a temporary name, renamed to `out` once whole. It is
    `complete` when it ends where a complete trace does; else the run went on past it (or
    was cut short), and a replay compares what it holds."""
    folder = out.parent if str(out.parent) else Path(".")
    with signals_held():  # a stop between these lines would leave the empty file behind
        handle, scratch_name = tempfile.mkstemp(prefix=f".{out.name}.", dir=folder)
        os.close(handle)
        scratch = Path(scratch_name)
        scratch.unlink()  # a free name: the writer creates the file itself
    try:
        writer = TraceWriter(scratch, meta)
        num_requests = _copy_rows(trace, writer, start, last)
        writer.close(complete=complete, final_meta={"num_steps": str(last - start + 1)})
        with signals_held():
            os.replace(scratch, out)
    finally:
        for leftover in (scratch, scratch.with_name(scratch.name + ".wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return num_requests


def _copy_rows(trace: Trace, writer: TraceWriter, start: int, last: int) -> int:
    writer.submit({"_config": trace.arrow(query(__package__, "snapshot_config"))})
    requests = trace.arrow(query(__package__, "snapshot_requests"), [start, last])
    writer.submit({"_requests": requests})
    for spec in table_specs():
        if not any(column[0] == "step" for column in spec.columns):
            continue
        params = [spec.name, start, last]
        reader = trace.stream(query(__package__, "snapshot_table"), _BATCH_ROWS, params)
        for batch in reader:
            writer.submit({spec.name: pa.Table.from_batches([batch])})
    return int(requests.num_rows)
