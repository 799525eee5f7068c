"""The heap that exists when an engine starts stepping, kept out of the garbage collector's way.

vLLM's `EngineCore.__init__` ends with `freeze_gc_heap()` ("Mark the startup heap as
static so that it's ignored by GC. Reduces pause times of oldest generation
collections") and its shutdown unfreezes it. A step loop does the same around its
steps: the KV cache's blocks, the workload and whatever the process held before are
not walked by every oldest-generation collection (`benchmarks/RESULTS.md`,
tracer_overhead). Unlike vLLM
it does not collect first: a collection would cost as much as the heap is large on
every loop, and the cyclic garbage frozen with the heap is collected once the loop
ends. Loops may nest or run on several threads: the heap is unfrozen when the last
one running ends. No decision depends on the collector.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_running = 0


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze what is on the heap now while the block runs (and others like it)."""
    global _running
    with _lock:
        if _running == 0:
            gc.freeze()
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0:
                gc.unfreeze()
