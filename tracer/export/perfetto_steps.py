"""The engine track: each step's schedule, model and update slices, and the counters around them.

A step is six packets (two when idle), and a 1M-step trace is six million: a batch's
fixed fields are merged in from templates at once, and only the fields a step changes are set.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
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


STEP_COLUMNS = (
    *("step", "idle", "start_ns", "schedule_ns", "model_ns", "update_ns"),
    *("token_budget", "num_scheduled_tokens", "num_scheduled_reqs", "num_preemptions"),
    *("admission_stop", "running_pass_end", "blocked_request_id"),
    *("num_free_blocks_before", "num_free_blocks_after_schedule", "num_free_blocks_after_update"),
    *("num_running_before", "num_running_after", "num_waiting_before", "num_waiting_after"),
)
"""The columns of `perfetto_steps.sql`, read by position: a row is unpacked, not looked up."""


class StepTimes:
    """Where each step and each step's update start, in ns, for the request tracks: from the
    first step the trace holds (a recording whose oldest segments were deleted starts late,
    and nothing is kept for the steps before it)."""

    def __init__(self) -> None:
        self.first_step = 0
        self.num_steps = 0
        self.starts = array("q")
        """By step, from `first_step` (a step in a gap: the next step held)."""
        self.updates = array("q")
        self.end = 0

    def add(self, batch: pa.RecordBatch) -> None:
        """Take the times of a batch of `perfetto_steps.sql` rows (steps in order)."""
        columns = batch.select(["step", "start_ns", "schedule_ns", "model_ns", "update_ns"])
        for step, start, schedule, model, update in zip(*columns.to_pydict().values(), strict=True):
            if not self.num_steps:
                self.first_step = step
            index = step - self.first_step
            while len(self.starts) <= index:
                self.starts.append(start)
                self.updates.append(start)
            self.updates[index] = start + schedule + model
            self.end = start + schedule + model + update
            self.num_steps += 1

    def start(self, step: int) -> int:
        """The time step `step` starts (the timeline's start for one before the first step
        held, the end of the last step for one past it)."""
        return self._at(self.starts, step)

    def update(self, step: int) -> int:
        return self._at(self.updates, step)

    def _at(self, times: array[int], step: int) -> int:
        index = max(step - self.first_step, 0)
        if index < len(times):
            return times[index]
        return self.end if times else 0


def step_packets(batch: pa.RecordBatch) -> bytes:
    """One batch of steps (rows of `perfetto_steps.sql`) as serialized packets.

    The packets' fixed fields come from one merge of cached per-step templates, then each
    packet gets only what changes from step to step: its time, counter values, the step.
    """
    assert tuple(batch.schema.names) == STEP_COLUMNS, "perfetto_steps.sql and the rows disagree"
    rows = list(zip(*batch.to_pydict().values(), strict=True))
    trace = Trace()
    trace.MergeFromString(b"".join([_template(*_shape(row)) for row in rows]))
    packets = iter(trace.packet)
    for row in rows:
        _fill_step(packets, row)
    return bytes(trace.SerializeToString())


Missing = tuple[bool, ...]
_NONE_MISSING: Missing = (False,) * 7


def _shape(row: tuple[Any, ...]) -> tuple[bool, bool, Missing, tuple[Any, ...]]:
    """What a step's template depends on: idle or not, which counters it did not record,
    and the args that repeat from step to step (all but the step and its tokens)."""
    counters = row[13:]
    missing = tuple(v is None for v in counters) if None in counters else _NONE_MISSING
    return row[1], row[7] is None, missing, (row[6], *row[8:13])


# Called with `_shape`'s tuple spread: the cache's key stays one positional tuple.
@lru_cache(maxsize=1 << 12)
def _template(
    idle: bool,  # noqa: FBT001
    no_tokens: bool,  # noqa: FBT001
    missing: Missing,
    fixed_args: tuple[Any, ...],
) -> bytes:
    """A step's packets with every field but times, counter values, the step and its tokens."""
    trace = Trace()
    add = trace.packet.add
    first = _event(add, _BEGIN, _IDLE if idle else _SCHEDULE)
    _counter_tracks(first, _BEFORE, (missing[0], missing[3], missing[5]))
    _fixed_args(first.debug_annotations.add, fixed_args)
    after = (missing[2], no_tokens and not idle, missing[4], missing[6])
    if not idle:
        _counter_tracks(_event(add, _END, 0), _SCHEDULED, (missing[1], no_tokens))
        _event(add, _BEGIN, _MODEL)
        _event(add, _END, 0)
        _event(add, _BEGIN, _UPDATE)
    _counter_tracks(_event(add, _END, 0), _AFTER, after)
    return bytes(trace.SerializeToString())


def _fill_step(packets: Iterator[Any], row: tuple[Any, ...]) -> None:
    """Set the step's packets' times, counter values (on its begin and ends), step and tokens."""
    (step, idle, t0, schedule_ns, model_ns, update_ns, _, tokens) = row[:8]
    (free_before, free_scheduled, free_after, running_before, running_after) = row[13:18]
    (waiting_before, waiting_after) = row[18:]
    first = next(packets)
    first.timestamp = t0
    event = first.track_event
    _values(event, (free_before, running_before, waiting_before))
    add = event.debug_annotations.add
    add(name_iid=_STEP, int_value=step)
    if tokens is not None:
        add(name_iid=_TOKENS, int_value=tokens)
    t1 = t0 + schedule_ns
    t2 = t1 + model_ns
    if not idle:
        end = next(packets)
        end.timestamp = t1
        _values(end.track_event, (free_scheduled, tokens))
        next(packets).timestamp = t1
        next(packets).timestamp = t2
        next(packets).timestamp = t2
    last = next(packets)
    last.timestamp = t2 + update_ns
    _values(last.track_event, (free_after, 0 if idle else tokens, running_after, waiting_after))


def _values(event: Any, values: tuple[int | None, ...]) -> None:
    """Counter values sampled at the event; one the step did not record is left out."""
    if None in values:
        values = tuple(v for v in values if v is not None)
    event.extra_counter_values.extend(values)


def _event(add: Any, kind: int, name_iid: int) -> Any:
    """A packet with a track event on the engine track (a name for a slice's begin)."""
    event = add(
        trusted_packet_sequence_id=SEQUENCE_ID, sequence_flags=SEQ_NEEDS_INCREMENTAL_STATE
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
