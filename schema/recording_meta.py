"""A recording's `_meta`, and each segment's own facts, from its `meta.parquet` files.

The files hold key/value rows in the order they were set, a part or a closed segment at
a time; read in the recording's order, the last value of a key is its value. Keys that
start `segment_` describe the segment whose file holds them, not the trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from .recording_layout import Segment
from .sql_files import query

SEGMENT_KEY = "segment_"
"""The prefix of the keys that describe one segment."""


@dataclass(frozen=True)
class SegmentFacts:
    """One segment as found on disk and as its meta describes it."""

    segment: Segment
    last_step: int | None
    """Its last step as written when it closed (None: open, or a segment that does not say)."""
    ended_by: str | None
    """How it ended: rotated, fell_behind (steps were dropped after it) or closed (None: open)."""
    opens_with_checkpoint: bool
    kept: bool = False
    """A step in it met the recording's keep rule: retention spares it."""

    @property
    def first_step(self) -> int:
        return self.segment.first_step

    @property
    def closed(self) -> bool:
        return self.segment.closed

    @property
    def folders(self) -> tuple[Path, ...]:
        """The closed segment's folder, or the open one's parts in order."""
        return self.segment.folders

    @property
    def fell_behind(self) -> bool:
        return self.ended_by == "fell_behind"


@dataclass(frozen=True)
class RecordingMeta:
    """The trace's meta (the last value of each key, no `segment_` key) and each segment's."""

    meta: dict[str, str]
    segments: tuple[SegmentFacts, ...]


def read_recording_meta(
    con: duckdb.DuckDBPyConnection, segments: Sequence[Segment]
) -> RecordingMeta:
    """The meta of the recording whose segments are `segments` (in order), read by `con`."""
    files = [(index, str(path)) for index, s in enumerate(segments) for path in s.files("_meta")]
    by_file = {path: position for position, (_, path) in enumerate(files)}
    rows = _meta_rows(con, [path for _, path in files])
    rows.sort(key=lambda row: (by_file[row[0]], row[1]))
    meta: dict[str, str] = {}
    own: list[dict[str, str]] = [{} for _ in segments]
    for path, _, key, value in rows:
        if key.startswith(SEGMENT_KEY):
            own[files[by_file[path]][0]][key] = value
        else:
            meta[key] = value
    return RecordingMeta(
        meta, tuple(_facts(s, facts) for s, facts in zip(segments, own, strict=True))
    )


def _meta_rows(con: duckdb.DuckDBPyConnection, files: list[str]) -> list[tuple[str, int, str, str]]:
    """Every row of the meta files: (file, row in it, key, value)."""
    if not files:
        return []
    return [
        tuple(row) for row in con.execute(query(__package__, "recording_meta"), [files]).fetchall()
    ]


def _facts(segment: Segment, own: dict[str, str]) -> SegmentFacts:
    last = own.get("segment_last_step", "")
    return SegmentFacts(
        segment=segment,
        last_step=int(last) if last.lstrip("-").isdigit() and segment.closed else None,
        ended_by=own.get("segment_end") if segment.closed else None,
        opens_with_checkpoint=own.get("segment_checkpoint") == "true",
        kept=own.get("segment_kept") == "true",
    )
