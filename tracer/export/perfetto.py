"""A trace as a Perfetto timeline, built with the `perfetto` package's own protos."""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from stepscope.schema import Trace, open_trace
from stepscope.schema.sql_files import query

from .output import ExportError, atomic_file, writing

_BATCH_ROWS = 1 << 15
_PARALLEL_FROM_STEPS = 4 * _BATCH_ROWS
"""Below this many steps the packets are built in this process: workers cost a start-up."""
_MAX_WORKERS = 8
_PAST_THE_END = 1 << 62
"""The last step of a window that runs to the trace's end."""

Write = Callable[[bytes], Any]
Window = tuple[int, int]
"""The first and last step laid out."""


@dataclass(frozen=True)
class PerfettoExport:
    """What an export wrote: the file, steps and request events laid out, and the time base."""

    path: Path
    num_steps: int
    num_request_events: int
    timed: bool


def export_perfetto(
    trace_path: Path,
    out: Path,
    workers: int | None = None,
    *,
    from_step: int | None = None,
    to_step: int | None = None,
) -> PerfettoExport:
    """Write the trace's steps, requests and counters as a Perfetto protobuf trace at `out`:
    every step, or `from_step` to `to_step` (the slices crossing either edge cut there).

    `workers`: processes that build a long trace's step packets (default: one per core, up
    to 8; 1 builds everything in this process). The file is the same either way.
    """
    builders = _builders()
    if workers is None:
        workers = min(len(os.sched_getaffinity(0)), _MAX_WORKERS)
    with open_trace(trace_path) as trace:
        window = _window(trace, from_step, to_step)
        with atomic_file(out) as temporary:
            try:
                with temporary.open("wb") as file:
                    return _write(trace, window, builders, file.write, out, workers)
            except OSError as error:
                raise writing(out, error) from None


def _window(trace: Trace, from_step: int | None, to_step: int | None) -> Window:
    """The steps to lay out (every step when no bound is given); a window holding none of
    the trace's steps is an ExportError."""
    window = (from_step or 0, _PAST_THE_END if to_step is None else to_step)
    first, last = trace.first_step, trace.last_step
    whole = from_step is None and to_step is None
    if whole or (trace.num_steps and window[0] <= last and window[1] >= first):
        return window
    asked = " ".join(
        f"{option} {step}" for option, step in (("--from-step", from_step), ("--to-step", to_step))
        if step is not None
    )  # fmt: skip
    held = f"steps {first}..{last}" if trace.num_steps else "no step"
    raise ExportError(f"{asked}: {trace.path} has {held}")


def _write(
    trace: Trace, window: Window, builders: dict[str, Any], write: Write, out: Path, workers: int
) -> PerfettoExport:
    """The preamble (names, tracks), the engine track and counters, then the request tracks."""
    steps, requests, tracks = builders["steps"], builders["requests"], builders["tracks"]
    timed = bool(trace.sql(query(__package__, "perfetto_timed")).fetchall()[0][0])
    engine = "engine steps" if timed else "engine steps (no recorded times: 1 µs is one step)"
    request_ids = trace.sql(query(__package__, "perfetto_request_ids"), list(window)).fetchall()
    write(tracks.preamble(engine, request_ids).SerializeToString())
    times = steps.StepTimes()
    for packets in _step_packets(trace, window, steps, times, workers):
        write(packets)
    num_events = 0
    for batch in _batches(trace, "perfetto_requests", window):
        write(requests.request_packets(batch, times))
        num_events += batch.num_rows
    return PerfettoExport(out, times.num_steps, num_events, timed)


def _step_packets(
    trace: Trace, window: Window, steps: Any, times: Any, workers: int
) -> Iterator[bytes]:
    """Each batch of steps' packets, in order; built by worker processes on a long trace."""
    if min(trace.num_steps, window[1] - window[0] + 1) < _PARALLEL_FROM_STEPS or workers < 2:
        for batch in _batches(trace, "perfetto_steps", window):
            times.add(batch)
            yield steps.step_packets(batch)
        return
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        pending: deque[Future[bytes]] = deque()
        for batch in _batches(trace, "perfetto_steps", window):
            times.add(batch)
            pending.append(pool.submit(steps.step_packets, batch))
            while len(pending) > 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _batches(trace: Trace, name: str, window: Window) -> Iterator[pa.RecordBatch]:
    yield from trace.sql(query(__package__, name), list(window)).to_arrow_reader(_BATCH_ROWS)


def _builders() -> dict[str, Any]:
    """The packet builders, imported only now: the `perfetto` package is an optional extra."""
    try:
        from . import perfetto_requests, perfetto_steps, perfetto_tracks
    except Exception as error:  # ImportError, or protobuf's VersionError for too old a runtime
        raise ExportError(
            f"--perfetto needs the perfetto package ({error}): pip install 'stepscope[export]'"
        ) from None
    return {"steps": perfetto_steps, "requests": perfetto_requests, "tracks": perfetto_tracks}
