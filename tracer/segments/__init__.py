"""Recording into a folder of segments: closed on a schedule, each replayable on its own,
the oldest deleted by a retention rule (`schema/recording_layout.py` has the layout)."""

from .settings import Retention, SegmentEvery, SegmentSettings, parse_retention, parse_segment_every
from .writer import SegmentWriter

__all__ = [
    "Retention",
    "SegmentEvery",
    "SegmentSettings",
    "SegmentWriter",
    "parse_retention",
    "parse_segment_every",
]
