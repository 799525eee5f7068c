"""Sizes and durations as a user writes them (`2GB`, `512MiB`, `8G`, `90s`, `7d`), read and
written back: one reading for every setting and option that takes one (retention, keep
caps, pruning, a snapshot's window), and for `STEPSCOPE_MEMORY_LIMIT`, the one setting a
run's memory check (`engine/memory_limit.py`) and every reader's database
(`schema/reader_memory.py`) both read. A leaf every layer may use: it imports nothing of
ours, and each caller words its own error from the ValueError or None it gets.
"""

from __future__ import annotations

import os
import re

MEMORY_LIMIT_ENV = "STEPSCOPE_MEMORY_LIMIT"

_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_SIZE = re.compile(_NUMBER + r"\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)")
_DURATION = re.compile(_NUMBER + r"\s*(s|m|h|d)")
_BYTES = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_MEMORY = re.compile(_NUMBER + r"\s*(?:([kmgt])(i?)(b?)|(b?))")
_POWERS = "kmgt"


def parse_size(text: str) -> int | None:
    """The bytes `text` names (`500MB`, `2GB`, `16GiB`, `100B`; any case), or None when it
    names no size above zero."""
    match = _SIZE.fullmatch(text.strip().lower())
    if match is None or float(match.group(1)) <= 0:
        return None
    return int(float(match.group(1)) * _BYTES[match.group(2)])


def parse_memory(text: str) -> int | None:
    """The bytes a memory setting names, or None when it names none above zero: a size as
    `parse_size` reads it (`4GB` decimal, `4GiB` binary), a bare suffix binary as `ulimit`
    and Docker read it (`8G`, `512M`), or a bare number of bytes."""
    match = _MEMORY.fullmatch(text.strip().lower())
    if match is None or float(match.group(1)) <= 0:
        return None
    number, prefix, binary, byte = (
        float(match.group(1)),
        match.group(2),
        match.group(3),
        match.group(4),
    )
    if prefix is None:
        return int(number)
    base = 1000 if byte and not binary else 1024
    return int(number * base ** (_POWERS.index(prefix) + 1))


def memory_limit_setting() -> int | None:
    """`STEPSCOPE_MEMORY_LIMIT` in bytes (None: unset or empty); a ValueError naming it when
    it is not a size."""
    given = os.environ.get(MEMORY_LIMIT_ENV, "")
    if not given.strip():
        return None
    limit = parse_memory(given)
    if limit is None:
        raise ValueError(
            f"{MEMORY_LIMIT_ENV}={given!r}: not a size (give one such as 8G, 4GB, 512MB or 16GiB)"
        )
    return limit


def parse_duration(text: str) -> float | None:
    """The seconds `text` names (`90s`, `10m`, `24h`, `7d`), or None when it names no time
    above zero."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None or float(match.group(1)) <= 0:
        return None
    return float(match.group(1)) * _SECONDS[match.group(2)]


def format_size(num_bytes: int) -> str:
    """The size in the largest decimal unit that writes it exactly (`2GB`, `1500MB`, `7B`)."""
    for unit, length in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if num_bytes >= length and num_bytes % length == 0:
            return f"{num_bytes // length}{unit}"
    return f"{num_bytes}B"


def format_duration(seconds: float) -> str:
    """The time in the largest unit that writes it exactly (`7d`, `36h`, `90s`)."""
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length and seconds % length == 0:
            return f"{seconds / length:g}{unit}"
    return f"{seconds:g}s"
