"""The engine track: each step's schedule, model and update slices, and the counters around them.

A step is six packets (two when idle), and a 1M-step trace is six million: a batch's
fixed fields are merged in from templates at once, and only the fields a step changes are set.
"""

from __future__ import annotations

from array import array
from functools import lru_cache
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
_FIXED_INT_ARGS = tuple(
    ARG_NAMES[name] for name in ("token_budget", "num_scheduled_reqs", "num_preemptions")
)
_ENUM_ARGS = (ARG_NAMES["admission_stop"], ARG_NAMES["running_pass_end"])
_COUNTED = (0, 1, 5)
"""The packets of a step that carry counter values: its begin, the schedule's end, its end."""


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
    """One batch of steps (rows of `perfetto_steps.sql`) as serialized packets.

    The packets' fixed fields come from one merge of per-shape templates, then each packet
    gets its time, counter values and args: a field set per value, not a packet built.
    """
    assert tuple(batch.schema.names) == STEP_COLUMNS, "perfetto_steps.sql and the rows disagree"
    steps = [_times_and_counters(row) for row in zip(*batch.to_pydict().values(), strict=True)]
    trace = Trace()
    trace.MergeFromString(b"".join([_template(*_shape(*step)) for step in steps]))
    packets = iter(trace.packet)
    for row, times, counters in steps:
        _fill_step(packets, row, times, counters)
    return bytes(trace.SerializeToString())


Counters = tuple[tuple[int | None, ...], ...]


def _times_and_counters(row: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[int, ...], Counters]:
    """The step's slice boundaries, and the counter values sampled at its begin and ends."""
    (_, idle, t0, schedule_ns, model_ns, update_ns, _, tokens) = row[:8]
    (free_before, free_scheduled, free_after, running_before, running_after) = row[13:18]
    (waiting_before, waiting_after) = row[18:]
    t1 = t0 + schedule_ns
    t2 = t1 + model_ns
    before = (free_before, running_before, waiting_before)
    if idle:
        t3 = t0 + schedule_ns + model_ns + update_ns
        return row, (t0, t3), (before, (free_after, 0, running_after, waiting_after))
    after = (free_after, tokens, running_after, waiting_after)
    return row, (t0, t1, t1, t2, t2, t2 + update_ns), (before, (free_scheduled, tokens), after)


Shape = tuple[tuple[bool, ...], ...]


def _shape(row: tuple[Any, ...], _: Any, counters: Counters) -> tuple[Shape, tuple[Any, ...]]:
    """What a step's template depends on: idle or not, which counters it recorded, and the
    args that repeat from step to step (all but the step and its scheduled tokens)."""
    return tuple(tuple(v is None for v in values) for values in counters), (row[6], *row[8:13])


@lru_cache(maxsize=1 << 12)
def _template(shape: Shape, fixed_args: tuple[Any, ...]) -> bytes:
    """A step's packets with every field but times, counter values, the step and its tokens."""
    trace = Trace()
    add = trace.packet.add
    idle = len(shape) == 2
    first = _event(add, 0, _BEGIN, _IDLE if idle else _SCHEDULE)
    _counter_tracks(first, _BEFORE, shape[0])
    _fixed_args(first.debug_annotations.add, fixed_args)
    if idle:
        _counter_tracks(_event(add, 0, _END, 0), _AFTER, shape[1])
    else:
        _counter_tracks(_event(add, 0, _END, 0), _SCHEDULED, shape[1])
        _event(add, 0, _BEGIN, _MODEL)
        _event(add, 0, _END, 0)
        _event(add, 0, _BEGIN, _UPDATE)
        _counter_tracks(_event(add, 0, _END, 0), _AFTER, shape[2])
    return bytes(trace.SerializeToString())


def _fill_step(
    packets: Any, row: tuple[Any, ...], times: tuple[int, ...], counters: Counters
) -> None:
    """Set the step's packets' times, counter values (on the begin and ends) and args."""
    counted = iter(counters)
    for index, timestamp in enumerate(times):
        packet = next(packets)
        packet.timestamp = timestamp
        if index in _COUNTED:
            values = next(counted)
            if None in values:
                values = tuple(v for v in values if v is not None)
            packet.track_event.extra_counter_values.extend(values)
            if index == 0:
                add = packet.track_event.debug_annotations.add
                add(name_iid=_STEP, int_value=row[0])
                if row[7] is not None:
                    add(name_iid=_TOKENS, int_value=row[7])


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


def _counter_tracks(event: Any, tracks: tuple[int, ...], missing: tuple[bool, ...]) -> None:
    """The counters sampled at the event; one the step did not record is left out."""
    event.extra_counter_track_uuids.extend(
        [track for track, absent in zip(tracks, missing, strict=True) if not absent]
    )


def _fixed_args(add: Any, fixed_args: tuple[Any, ...]) -> None:
    """The step's budget, requests, preemptions, and why each pass stopped, as slice args."""
    for name_iid, value in zip(_FIXED_INT_ARGS, fixed_args[:3], strict=True):
        if value is not None:
            add(name_iid=name_iid, int_value=value)
    for name_iid, value in zip(_ENUM_ARGS, fixed_args[3:5], strict=True):
        if value is not None:
            add(name_iid=name_iid, string_value_iid=STRING_VALUES[value])
    if fixed_args[5] is not None:
        add(name_iid=_BLOCKED, string_value=fixed_args[5])


_SCHEDULE, _MODEL, _UPDATE, _IDLE = (
    EVENT_NAMES[n] for n in ("schedule", "model", "update", "idle")
)
_STEP, _TOKENS = ARG_NAMES["step"], ARG_NAMES["num_scheduled_tokens"]
_BLOCKED = ARG_NAMES["blocked_request"]
