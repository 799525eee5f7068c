"""The engine track: each step's schedule, model and update slices, and the counters around them.

A step is six packets; the loop sets each field once and calls nothing per packet
but the protobuf builders, since a 1M-step trace is six million packets.
"""

from __future__ import annotations

from array import array
from typing import Any

import pyarrow as pa
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

from .perfetto_tracks import (
    ARG_NAMES,
    BUDGET_USED_TRACK,
    ENGINE_TRACK,
    EVENT_NAMES,
    FREE_BLOCKS_TRACK,
    RUNNING_TRACK,
    SEQ_NEEDS_INCREMENTAL_STATE,
    SEQUENCE_ID,
    STRING_VALUES,
    WAITING_TRACK,
)

_BEGIN = TrackEvent.TYPE_SLICE_BEGIN
_END = TrackEvent.TYPE_SLICE_END
_BEFORE = (FREE_BLOCKS_TRACK, RUNNING_TRACK, WAITING_TRACK)
_SCHEDULED = (FREE_BLOCKS_TRACK, BUDGET_USED_TRACK)
_AFTER = (FREE_BLOCKS_TRACK, BUDGET_USED_TRACK, RUNNING_TRACK, WAITING_TRACK)
_STEP_ARGS = tuple(
    ARG_NAMES[name]
    for name in ("token_budget", "num_scheduled_tokens", "num_scheduled_reqs", "num_preemptions")
)
_ENUM_ARGS = (ARG_NAMES["admission_stop"], ARG_NAMES["running_pass_end"])


STEP_COLUMNS = (
    *("step", "idle", "start_ns", "schedule_ns", "model_ns", "update_ns"),
    *("token_budget", "num_scheduled_tokens", "num_scheduled_reqs", "num_preemptions"),
    *("admission_stop", "running_pass_end", "blocked_request_id"),
    *("num_free_blocks_before", "num_free_blocks_after_schedule", "num_free_blocks_after_update"),
    *("num_running_before", "num_running_after", "num_waiting_before", "num_waiting_after"),
)
"""The columns of `perfetto_steps.sql`, read by position: a row is unpacked, not looked up."""


class StepTimes:
    """Where each step and each step's update start, in ns, for the request tracks."""

    def __init__(self) -> None:
        self.starts = array("q")
        self.updates = array("q")
        self.end = 0

    def add(self, batch: pa.RecordBatch) -> None:
        """Take the times of a batch of `perfetto_steps.sql` rows (steps in order, from 0)."""
        columns = batch.select(["step", "start_ns", "schedule_ns", "model_ns", "update_ns"])
        for step, start, schedule, model, update in zip(*columns.to_pydict().values(), strict=True):
            while len(self.starts) <= step:
                self.starts.append(start)
                self.updates.append(start)
            self.updates[step] = start + schedule + model
            self.end = start + schedule + model + update

    def start(self, step: int) -> int:
        """The time step `step` starts (the end of the last step for one past it)."""
        return self.starts[step] if step < len(self.starts) else self.end

    def update(self, step: int) -> int:
        return self.updates[step] if step < len(self.updates) else self.end


def step_packets(batch: pa.RecordBatch) -> bytes:
    """One batch of steps (rows of `perfetto_steps.sql`) as serialized packets."""
    assert tuple(batch.schema.names) == STEP_COLUMNS, "perfetto_steps.sql and the rows disagree"
    trace = Trace()
    add = trace.packet.add
    for row in zip(*batch.to_pydict().values(), strict=True):
        _add_step(add, row)
    return bytes(trace.SerializeToString())


def _add_step(add: Any, row: tuple[Any, ...]) -> None:
    (_, idle, t0, schedule_ns, model_ns, update_ns, _, tokens) = row[:8]
    (free_before, free_scheduled, free_after, running_before, running_after) = row[13:18]
    (waiting_before, waiting_after) = row[18:]
    t1 = t0 + schedule_ns
    t2 = t1 + model_ns
    t3 = t2 + update_ns
    first = _event(add, t0, _BEGIN, _IDLE if idle else _SCHEDULE)
    _counters(first, _BEFORE, (free_before, running_before, waiting_before))
    _step_args(first.debug_annotations.add, row)
    if idle:
        _counters(_event(add, t3, _END, 0), _AFTER, (free_after, 0, running_after, waiting_after))
        return
    _counters(_event(add, t1, _END, 0), _SCHEDULED, (free_scheduled, tokens))
    _event(add, t1, _BEGIN, _MODEL)
    _event(add, t2, _END, 0)
    _event(add, t2, _BEGIN, _UPDATE)
    _counters(_event(add, t3, _END, 0), _AFTER, (free_after, tokens, running_after, waiting_after))


def _event(add: Any, timestamp: int, kind: int, name_iid: int) -> Any:
    """A packet with a track event on the engine track (a name for a slice's begin)."""
    event = add(
        timestamp=timestamp,
        trusted_packet_sequence_id=SEQUENCE_ID,
        sequence_flags=SEQ_NEEDS_INCREMENTAL_STATE,
    ).track_event
    event.type = kind
    event.track_uuid = ENGINE_TRACK
    if name_iid:
        event.name_iid = name_iid
    return event


def _counters(event: Any, tracks: tuple[int, ...], values: tuple[int | None, ...]) -> None:
    """Counter values sampled at the event; a value the step did not record is left out."""
    if None in values:
        kept = [(t, v) for t, v in zip(tracks, values, strict=True) if v is not None]
        tracks, values = tuple(t for t, _ in kept), tuple(v for _, v in kept)
    event.extra_counter_track_uuids.extend(tracks)
    event.extra_counter_values.extend(values)


def _step_args(add: Any, row: tuple[Any, ...]) -> None:
    """The step, its budget use, and why each pass stopped, as the slice's args."""
    add(name_iid=_STEP, int_value=row[0])
    for name_iid, value in zip(_STEP_ARGS, row[6:10], strict=True):
        if value is not None:
            add(name_iid=name_iid, int_value=value)
    for name_iid, value in zip(_ENUM_ARGS, row[10:12], strict=True):
        if value is not None:
            add(name_iid=name_iid, string_value_iid=STRING_VALUES[value])
    if row[12] is not None:
        add(name_iid=_BLOCKED, string_value=row[12])


_SCHEDULE, _MODEL, _UPDATE, _IDLE = (
    EVENT_NAMES[n] for n in ("schedule", "model", "update", "idle")
)
_STEP, _BLOCKED = ARG_NAMES["step"], ARG_NAMES["blocked_request"]
