"""A vLLM server's recorder runs its own threads at a lower CPU priority than the engine.

Building rows, compressing and writing files can wait; the engine's threads (and the
model's, and the API server's) cannot. On Linux a thread has its own nice value, so a
vLLM server's recorder gives its row builder and its writer the lowest priority (unless
`STEPSCOPE_TRACE_PRIORITY=normal`): where cores are free they run as before, and where
the engine keeps every core busy the kernel gives the engine the CPU first. A builder
starved long enough falls behind, and steps are dropped and counted (`background.py`).
A run stepscope drives itself (no client waits on it) waits for its builder instead of
dropping, so its threads keep their priority. RocksDB lowers the CPU priority of its
compaction threads the same way.

Elsewhere (macOS, Windows) a thread's priority cannot be set apart from its process's,
so nothing changes there.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

logger = logging.getLogger("stepscope.tracer")

RECORDER_NICENESS = 19
"""The nice value a recorder thread takes (Linux: 19 is the lowest priority; a thread
already nicer keeps its own)."""


def lower_priority(thread: threading.Thread) -> None:
    """Give `thread` (started, of this process) `RECORDER_NICENESS`; best effort: where
    that is refused, or the thread has ended, it stays as it is."""
    if not sys.platform.startswith("linux") or not thread.is_alive() or thread.native_id is None:
        return
    try:
        if os.getpriority(os.PRIO_PROCESS, thread.native_id) < RECORDER_NICENESS:
            os.setpriority(os.PRIO_PROCESS, thread.native_id, RECORDER_NICENESS)
    except OSError as error:
        logger.debug("stepscope: %s keeps its CPU priority: %s", thread.name, error)
