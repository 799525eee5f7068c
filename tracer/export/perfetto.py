"""A trace as a Perfetto timeline, built with the `perfetto` package's own protos."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.schema import Trace, open_trace
from stepscope.schema.sql_files import query

from .output import ExportError, atomic_file, writing

_BATCH_ROWS = 1 << 15


@dataclass(frozen=True)
class PerfettoExport:
    """What an export wrote: the file, steps and request events laid out, and the time base."""

    path: Path
    num_steps: int
    num_request_events: int
    timed: bool


def export_perfetto(trace_path: Path, out: Path) -> PerfettoExport:
    """Write the trace's steps, requests and counters as a Perfetto protobuf trace at `out`."""
    builders = _builders()
    with open_trace(trace_path) as trace, atomic_file(out) as temporary:
        try:
            with temporary.open("wb") as file:
                return _write(trace, builders, file.write, out)
        except OSError as error:
            raise writing(out, error) from None


def _write(
    trace: Trace, builders: dict[str, Any], write: Callable[[bytes], Any], out: Path
) -> PerfettoExport:
    steps_module, requests_module, tracks_module = (
        builders["steps"],
        builders["requests"],
        builders["tracks"],
    )
    timed = bool(trace.sql(query(__package__, "perfetto_timed")).fetchall()[0][0])
    requests = trace.sql(query(__package__, "perfetto_request_ids")).fetchall()
    clock = steps_module.StepClock()
    engine = "engine steps" if timed else "engine steps (no recorded times: 1 µs is one step)"
    write(tracks_module.preamble(engine, requests).SerializeToString())
    num_steps = _stream(trace, "perfetto_steps", steps_module.step_packets, clock, write)
    num_events = _stream(trace, "perfetto_requests", requests_module.request_packets, clock, write)
    return PerfettoExport(out, num_steps, num_events, timed)


def _stream(
    trace: Trace,
    name: str,
    build: Callable[[dict[str, list[Any]], Any], bytes],
    clock: Any,
    write: Callable[[bytes], Any],
) -> int:
    """Run one query and write its rows' packets batch by batch; the rows written."""
    rows = 0
    for batch in trace.sql(query(__package__, name)).to_arrow_reader(_BATCH_ROWS):
        write(build(batch.to_pydict(), clock))
        rows += batch.num_rows
    return rows


def _builders() -> dict[str, Any]:
    """The packet builders, imported only now: the `perfetto` package is an optional extra."""
    try:
        from . import perfetto_requests, perfetto_steps, perfetto_tracks
    except Exception as error:  # ImportError, or protobuf's VersionError for too old a runtime
        raise ExportError(
            f"--perfetto needs the perfetto package ({error}): pip install 'stepscope[export]'"
        ) from None
    return {"steps": perfetto_steps, "requests": perfetto_requests, "tracks": perfetto_tracks}
