"""A track per request: waiting, prefill chunks, decoding, preempted, and flows from preemptions."""

from __future__ import annotations

import pyarrow as pa
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

from .perfetto_steps import StepTimes
from .perfetto_tracks import (
    ARG_NAMES,
    EVENT_NAMES,
    SEQ_NEEDS_INCREMENTAL_STATE,
    SEQUENCE_ID,
    request_track,
)

_TYPES = {
    "B": TrackEvent.TYPE_SLICE_BEGIN,
    "E": TrackEvent.TYPE_SLICE_END,
    "I": TrackEvent.TYPE_INSTANT,
}


_COLUMNS = (
    *("step", "at_update", "type", "request_index", "name", "num_tokens", "num_steps"),
    *("detail", "flow_out", "flow_in"),
)


def request_packets(batch: pa.RecordBatch, times: StepTimes) -> bytes:
    """One batch of request events (rows of `perfetto_requests.sql`) as serialized packets."""
    assert tuple(batch.schema.names) == _COLUMNS, "perfetto_requests.sql and the rows disagree"
    trace = Trace()
    add = trace.packet.add
    arg = ARG_NAMES
    for row in zip(*batch.to_pydict().values(), strict=True):
        step, at_update, kind, request_index, name, num_tokens, num_steps, detail = row[:8]
        flow_out, flow_in = row[8:]
        event = add(
            timestamp=times.update(step) if at_update else times.start(step),
            trusted_packet_sequence_id=SEQUENCE_ID,
            sequence_flags=SEQ_NEEDS_INCREMENTAL_STATE,
        ).track_event
        event.type = _TYPES[kind]
        event.track_uuid = request_track(request_index)
        if name is None:
            continue
        event.name_iid = EVENT_NAMES[name]
        annotations = event.debug_annotations
        if num_tokens is not None:
            annotations.add(name_iid=arg["num_tokens"], int_value=num_tokens)
        if num_steps is not None and name == "decoding":
            annotations.add(name_iid=arg["num_steps"], int_value=num_steps)
        if detail is not None:
            annotations.add(name_iid=arg["detail"], string_value=detail)
        if flow_out is not None:
            event.flow_ids.append(flow_out)
        if flow_in is not None:
            event.terminating_flow_ids.append(flow_in)
    return bytes(trace.SerializeToString())
