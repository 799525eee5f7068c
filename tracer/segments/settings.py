"""How a recording is cut into segments and how much of it is kept.

segment=5000steps     a segment closes after this many steps
segment=60s           ... or once it has been open this long (monotonic clock)
retain=2GB            the oldest closed segments go while the folder holds more
retain=24h            ... or once they closed this long ago
retain=2GB,24h        both
keep=COND             closed segments where a step meets COND are spared (`keep.py`) ...
keep_max=500MB        ... up to this much of them (default: retain's size)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stepscope.quantities import format_duration, format_size, parse_duration, parse_size

from .keep import check_keep_condition

_STEPS = re.compile(r"(\d+)\s*steps?")


@dataclass(frozen=True, slots=True)
class SegmentEvery:
    """When the open segment closes: after `steps` steps, or once open `seconds` (one is set)."""

    steps: int | None = None
    seconds: float | None = None

    def due(self, steps_in_segment: int, seconds_open: float) -> bool:
        if self.steps is not None:
            return steps_in_segment >= self.steps
        assert self.seconds is not None
        return seconds_open >= self.seconds

    def __str__(self) -> str:
        if self.steps is not None:
            return f"{self.steps}steps"
        assert self.seconds is not None
        return format_duration(self.seconds)


@dataclass(frozen=True, slots=True)
class Retention:
    """The oldest closed segments are deleted past `max_bytes` or `max_age_s` (None: no bound)."""

    max_bytes: int | None = None
    max_age_s: float | None = None

    def __str__(self) -> str:
        bounds = []
        if self.max_bytes is not None:
            bounds.append(format_size(self.max_bytes))
        if self.max_age_s is not None:
            bounds.append(format_duration(self.max_age_s))
        return ",".join(bounds) or "all"


@dataclass(frozen=True, slots=True)
class KeepRule:
    """Closed segments with a step where `condition` holds are spared from `Retention`; of
    them, the oldest are deleted past `max_bytes` (None: no bound)."""

    condition: str
    max_bytes: int | None = None

    def __str__(self) -> str:
        bound = "no bound" if self.max_bytes is None else format_size(self.max_bytes)
        return f"{self.condition} ({bound})"


@dataclass(frozen=True, slots=True)
class SegmentSettings:
    """A segmented recording's settings."""

    every: SegmentEvery
    retain: Retention = Retention()
    keep: KeepRule | None = None


def parse_segment_every(raw: str, setting: str) -> SegmentEvery:
    """`5000steps` or `60s` (also `m`, `h`); anything else is a ValueError naming `setting`."""
    steps = _STEPS.fullmatch(raw.strip().lower())
    if steps is not None and int(steps.group(1)) > 0:
        return SegmentEvery(steps=int(steps.group(1)))
    seconds = parse_duration(raw)
    if seconds is not None:
        return SegmentEvery(seconds=seconds)
    raise ValueError(
        f"{setting}={raw!r}: expected the steps or the time a segment spans (5000steps, 60s)"
    )


def parse_retention(raw: str, setting: str) -> Retention:
    """`2GB`, `24h` or `2GB,24h`; anything else is a ValueError naming `setting`."""
    max_bytes: int | None = None
    max_age_s: float | None = None
    for item in raw.split(","):
        size, age = parse_size(item), parse_duration(item)
        if size is not None and max_bytes is None:
            max_bytes = size
        elif age is not None and max_age_s is None:
            max_age_s = age
        else:
            raise ValueError(
                f"{setting}={raw!r}: expected a size, an age or both to keep (2GB, 24h, 2GB,24h)"
            )
    return Retention(max_bytes, max_age_s)


def size_setting(raw: str, setting: str) -> int:
    """`500MB` (also `B`, `kB`, `GB`, `TB` and `KiB`...); anything else is a ValueError."""
    size = parse_size(raw)
    if size is None:
        raise ValueError(f"{setting}={raw!r}: expected a size (500MB, 2GB)")
    return size


def keep_rule(
    condition: tuple[str, str], keep_max: tuple[str | None, str], retain: Retention
) -> KeepRule:
    """The keep rule of `condition` (checked) and `keep_max` (None: retain's size bound),
    each a (raw value, setting it came from) pair."""
    (raw_condition, condition_setting), (raw_max, max_setting) = condition, keep_max
    checked = check_keep_condition(raw_condition, condition_setting)
    max_bytes = retain.max_bytes if raw_max is None else size_setting(raw_max, max_setting)
    return KeepRule(checked, max_bytes)
