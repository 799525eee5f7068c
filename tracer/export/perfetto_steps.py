"""The engine track: each step's schedule, model and update slices, and the counters around them."""

from __future__ import annotations

from array import array
from typing import Any

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

UNTIMED_STEP_NS = (333, 333, 334)
"""A step's schedule, model and update on a trace without timings: 1 µs is one step."""

_BEGIN = TrackEvent.TYPE_SLICE_BEGIN
_END = TrackEvent.TYPE_SLICE_END
_BEFORE = (FREE_BLOCKS_TRACK, RUNNING_TRACK, WAITING_TRACK)
_SCHEDULED = (FREE_BLOCKS_TRACK, BUDGET_USED_TRACK)
_AFTER = (FREE_BLOCKS_TRACK, BUDGET_USED_TRACK, RUNNING_TRACK, WAITING_TRACK)


class StepClock:
    """Where each step starts and where its update starts, in ns, as the steps are laid out."""

    def __init__(self) -> None:
        self.starts = array("q")
        self.updates = array("q")
        self.now = 0

    def start(self, step: int) -> int:
        """The time step `step` starts (the end of the last step for one past it)."""
        return self.starts[step] if step < len(self.starts) else self.now

    def update(self, step: int) -> int:
        return self.updates[step] if step < len(self.updates) else self.now


def step_packets(columns: dict[str, list[Any]], clock: StepClock) -> bytes:
    """One batch of steps (rows of `perfetto_steps.sql`) as serialized packets."""
    trace = Trace()
    add = trace.packet.add
    names = EVENT_NAMES
    for row in zip(*columns.values(), strict=True):
        step, idle, schedule_ns, model_ns, update_ns = row[:5]
        if schedule_ns is None:
            schedule_ns, model_ns, update_ns = UNTIMED_STEP_NS
        while len(clock.starts) <= step:
            clock.starts.append(clock.now)
            clock.updates.append(clock.now)
        t0 = clock.now
        t1 = t0 + schedule_ns
        t2 = t1 + model_ns
        t3 = t2 + update_ns
        clock.updates[step] = t2
        clock.now = t3
        (fb, fs, fu, rb, ra, wb, wa) = row[12:]
        first = _event(add, t0, _BEGIN, names["idle" if idle else "schedule"])
        _counters(first, _BEFORE, (fb, rb, wb))
        _schedule_args(first, row)
        if idle:
            _counters(_event(add, t3, _END, 0), _AFTER, (fu, 0, ra, wa))
            continue
        _counters(_event(add, t1, _END, 0), _SCHEDULED, (fs, row[6]))
        _event(add, t1, _BEGIN, names["model"])
        _event(add, t2, _END, 0)
        _event(add, t2, _BEGIN, names["update"])
        _counters(_event(add, t3, _END, 0), _AFTER, (fu, row[6], ra, wa))
    return bytes(trace.SerializeToString())


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


def _schedule_args(event: Any, row: tuple[Any, ...]) -> None:
    """The step, its budget use, and why each pass stopped, as the slice's args."""
    add = event.debug_annotations.add
    arg = ARG_NAMES
    add(name_iid=arg["step"], int_value=row[0])
    for name, value in zip(_INT_ARGS, row[5:9], strict=True):
        if value is not None:
            add(name_iid=arg[name], int_value=value)
    for name, value in zip(_ENUM_ARGS, row[9:11], strict=True):
        if value is not None:
            add(name_iid=arg[name], string_value_iid=STRING_VALUES[value])
    if row[11] is not None:
        add(name_iid=arg["blocked_request"], string_value=row[11])


_INT_ARGS = ("token_budget", "num_scheduled_tokens", "num_scheduled_reqs", "num_preemptions")
_ENUM_ARGS = ("admission_stop", "running_pass_end")
