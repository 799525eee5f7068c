"""One function run on both traces of a comparison at once, each in its own thread.

The work is DuckDB queries and numpy passes, which release the GIL, so the two traces'
reads overlap; each trace's connection is used by one thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from stepscope.schema import Trace

T = TypeVar("T")


def on_both(read: Callable[[Trace], T], a: Trace, b: Trace) -> tuple[T, T]:
    """`(read(a), read(b))`, b's read in a second thread while a's runs in this one (one
    read when both are the same trace: a connection runs one query at a time)."""
    if a is b:
        mine = read(a)
        return mine, mine
    with ThreadPoolExecutor(max_workers=1) as pool:
        theirs = pool.submit(read, b)
        mine = read(a)
        return mine, theirs.result()
