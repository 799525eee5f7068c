"""A Perfetto trace read back with the perfetto package's protos: slices, counters and flows."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent


@dataclass
class Slice:
    track: int
    name: str
    ts: int
    dur: int
    args: dict[str, Any]
    flow_ids: list[int]
    terminating_flow_ids: list[int]


@dataclass
class Timeline:
    """What a Perfetto trace shows: tracks by name, slices, counter samples, flows."""

    track_names: dict[int, str] = field(default_factory=dict)
    counter_tracks: set[int] = field(default_factory=set)
    slices: list[Slice] = field(default_factory=list)
    counters: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))

    def track(self, name: str) -> int:
        (uuid,) = [u for u, n in self.track_names.items() if n == name]
        return uuid

    def on(self, track_name: str) -> list[Slice]:
        uuid = self.track(track_name)
        return [s for s in self.slices if s.track == uuid]

    def flows(self) -> list[tuple[Slice, Slice]]:
        """(from, to) slices of each flow: flow_ids start one, terminating_flow_ids end it."""
        starts = {f: s for s in self.slices for f in s.flow_ids}
        return [(starts[f], s) for s in self.slices for f in s.terminating_flow_ids]


def read_timeline(path: Path) -> Timeline:
    """Parse the file and replay its track events: begin/end pairs become slices."""
    trace = Trace.FromString(path.read_bytes())
    timeline = Timeline()
    names: dict[int, str] = {}
    arg_names: dict[int, str] = {}
    strings: dict[int, str] = {}
    open_slices: dict[int, list[Slice]] = defaultdict(list)
    for packet in trace.packet:
        if packet.HasField("interned_data"):
            names.update({e.iid: e.name for e in packet.interned_data.event_names})
            arg_names.update({a.iid: a.name for a in packet.interned_data.debug_annotation_names})
            strings.update(
                {s.iid: s.str.decode() for s in packet.interned_data.debug_annotation_string_values}
            )
        if packet.HasField("track_descriptor"):
            descriptor = packet.track_descriptor
            timeline.track_names[descriptor.uuid] = descriptor.name
            if descriptor.HasField("counter"):
                timeline.counter_tracks.add(descriptor.uuid)
        if not packet.HasField("track_event"):
            continue
        event = packet.track_event
        for uuid, value in zip(
            event.extra_counter_track_uuids, event.extra_counter_values, strict=True
        ):
            timeline.counters[timeline.track_names[uuid]].append((packet.timestamp, value))
        if event.type == TrackEvent.TYPE_SLICE_END:
            begun = open_slices[event.track_uuid].pop()
            begun.dur = packet.timestamp - begun.ts
            continue
        args = {}
        for annotation in event.debug_annotations:
            key = arg_names[annotation.name_iid]
            kind = annotation.WhichOneof("value")
            args[key] = (
                strings[annotation.string_value_iid]
                if kind == "string_value_iid"
                else (getattr(annotation, kind))
            )
        begun = Slice(
            event.track_uuid,
            names[event.name_iid],
            packet.timestamp,
            0,
            args,
            list(event.flow_ids),
            list(event.terminating_flow_ids),
        )
        timeline.slices.append(begun)
        if event.type == TrackEvent.TYPE_SLICE_BEGIN:
            open_slices[event.track_uuid].append(begun)
    assert not any(open_slices.values()), "every slice is closed"
    return timeline
