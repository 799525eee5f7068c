"""What a run may hold in memory: each size knob's cost estimated and checked before it is built.

A knob set far too high (a billion blocks, a hundred million synthetic requests) would
otherwise grow the process until the machine swaps or the kernel kills it, with no
word of which knob did it. The estimates are per-object costs measured on CPython 3.11;
the limit is a share of the memory available when the run starts, or
`STEPSCOPE_MEMORY_LIMIT` (`8G`, `4GB`, `16GiB`, `512M`, or bytes: `stepscope.quantities`),
the setting a reader's memory limit reads too (`schema/reader_memory.py`).
"""

from __future__ import annotations

import os

from stepscope.quantities import MEMORY_LIMIT_ENV as LIMIT_ENV
from stepscope.quantities import memory_limit_setting

from .errors import InputError

BYTES_PER_BLOCK = 200
"""A `KVCacheBlock` and its entry in the free queue."""
BYTES_PER_REQUEST = 1_500
"""A request's spec, its `Request`, its queue entries and per-request records."""
BYTES_PER_TOKEN = 40
"""A token id in the workload's tuples, the request's token lists and its block hashes."""
BYTES_PER_JSON_CHAR = 12
"""Parsed JSON against its text: a 6-character token id becomes an int and two pointers."""
AVAILABLE_SHARE = 0.75
INT32_MAX = 2**31 - 1
"""The largest count a trace's INTEGER columns hold (steps, blocks, tokens, lengths)."""


class MemoryLimitError(InputError):
    """A size knob asks for more memory than this run may use."""


def memory_limit() -> int:
    """Bytes a run may use: `STEPSCOPE_MEMORY_LIMIT`, else a share of available memory."""
    override = limit_from_env()
    if override is not None:
        return override
    return int(_available_memory() * AVAILABLE_SHARE)


def limit_from_env() -> int | None:
    """`STEPSCOPE_MEMORY_LIMIT` in bytes (None: unset or empty); an `InputError` naming it
    when it is not a size."""
    try:
        return memory_limit_setting()
    except ValueError as error:
        raise InputError(str(error)) from None


def limit_source() -> str:
    """How the limit was set, for error messages."""
    if os.environ.get(LIMIT_ENV, "").strip():
        return f"{LIMIT_ENV}"
    return f"{AVAILABLE_SHARE:.0%} of available memory; {LIMIT_ENV} overrides"


def check_memory(knob: str, count: int, bytes_each: int, what: str) -> None:
    """Raise `MemoryLimitError` naming `knob` if `count` `what` of `bytes_each` do not fit."""
    problem = over_memory_limit(count, bytes_each, what)
    if problem is not None:
        raise MemoryLimitError(f"{knob}: {problem}")


def over_memory_limit(count: int, bytes_each: int, what: str) -> str | None:
    """What is wrong when `count` `what` of `bytes_each` bytes do not fit, else None."""
    needed = count * bytes_each
    limit = memory_limit()
    if needed <= limit:
        return None
    return (
        f"{count:,} {what} would need about {format_bytes(needed)}, more than the "
        f"{format_bytes(limit)} this run may use ({limit_source()}); at most "
        f"{limit // bytes_each:,} fit"
    )


def format_bytes(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def _available_memory() -> int:
    """MemAvailable from /proc/meminfo, else physical memory."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
