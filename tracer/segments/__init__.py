"""Recording into a folder of segments: closed on a schedule, each replayable on its own,
the oldest deleted by a retention rule (`schema/recording_layout.py` has the layout)."""

from .settings import (
    KeepRule,
    Retention,
    SegmentEvery,
    SegmentSettings,
    keep_rule,
    parse_retention,
    parse_segment_every,
)
from .writer import SegmentWriter

__all__ = [
    "KeepRule",
    "Retention",
    "SegmentEvery",
    "SegmentSettings",
    "SegmentWriter",
    "keep_rule",
    "parse_retention",
    "parse_segment_every",
]
