"""The Perfetto timeline's tracks (engine steps, counters, one per request) and interned names."""

from __future__ import annotations

from collections.abc import Iterable

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
    CounterDescriptor,
    DebugAnnotationName,
    EventName,
    InternedData,
    InternedString,
    Trace,
    TrackDescriptor,
)
from stepscope.schema.ddl import enum_types

SEQUENCE_ID = 1
"""Every packet is on one sequence, so interned names stay valid throughout."""
SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2

ENGINE_TRACK = 1
FREE_BLOCKS_TRACK = 2
BUDGET_USED_TRACK = 3
RUNNING_TRACK = 4
WAITING_TRACK = 5
REQUESTS_TRACK = 6
FIRST_REQUEST_TRACK = 1000

COUNTERS = (
    (FREE_BLOCKS_TRACK, "free KV blocks", "blocks"),
    (BUDGET_USED_TRACK, "token budget used", "tokens"),
    (RUNNING_TRACK, "running requests", "requests"),
    (WAITING_TRACK, "waiting requests", "requests"),
)


def _numbered(names: tuple[str, ...]) -> dict[str, int]:
    """Interning ids, from 1 (0 means none)."""
    return {name: iid for iid, name in enumerate(names, start=1)}


EVENT_NAMES = _numbered(
    (
        *("schedule", "model", "update", "idle"),
        *("waiting", "prefill", "recompute", "decoding", "preempted"),
        *("needs room", "finished", "aborted", "rejected"),
    )
)
ARG_NAMES = _numbered(
    (
        *("step", "token_budget", "num_scheduled_tokens", "num_scheduled_reqs"),
        *("num_preemptions", "admission_stop", "running_pass_end", "blocked_request"),
        *("num_tokens", "num_steps", "detail"),
    )
)
STRING_VALUES = _numbered(
    tuple(
        sorted({v for name in ("admission_stop", "running_pass_end") for v in enum_types()[name]})
    )
)
"""The values of the enum args, interned: every schedule slice carries two."""


def request_track(request_index: int) -> int:
    return FIRST_REQUEST_TRACK + request_index


def preamble(engine_name: str, requests: Iterable[tuple[int, str]]) -> Trace:
    """The interned names, then every track's descriptor."""
    trace = Trace()
    trace.packet.add(
        trusted_packet_sequence_id=SEQUENCE_ID,
        sequence_flags=SEQ_INCREMENTAL_STATE_CLEARED,
        interned_data=InternedData(
            event_names=[EventName(iid=i, name=n) for n, i in EVENT_NAMES.items()],
            debug_annotation_names=[
                DebugAnnotationName(iid=i, name=n) for n, i in ARG_NAMES.items()
            ],
            debug_annotation_string_values=[
                InternedString(iid=i, str=v.encode()) for v, i in STRING_VALUES.items()
            ],
        ),
    )
    add = trace.packet.add
    add(track_descriptor=TrackDescriptor(uuid=ENGINE_TRACK, name=engine_name))
    for uuid, name, unit in COUNTERS:
        add(
            track_descriptor=TrackDescriptor(
                uuid=uuid, name=name, counter=CounterDescriptor(unit_name=unit)
            )
        )
    add(
        track_descriptor=TrackDescriptor(
            uuid=REQUESTS_TRACK, name="requests", child_ordering=TrackDescriptor.EXPLICIT
        )
    )
    for index, request_id in requests:
        add(
            track_descriptor=TrackDescriptor(
                uuid=request_track(index),
                parent_uuid=REQUESTS_TRACK,
                name=request_id,
                sibling_order_rank=index,
            )
        )
    return trace
