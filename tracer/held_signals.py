"""Stretches of the main thread that a stop signal must not cut short: it waits until they end.

Ctrl-C raises wherever the main thread is; a trace file closed half-way keeps its
write-ahead log, and buffered rows handed half-way to the writer are lost. Inside
`signals_held()` a SIGINT, SIGTERM or SIGHUP is only noted, then delivered again,
to whatever handles it outside, once the stretch is over.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, `kill` / `timeout` / `docker stop`, and a closed terminal or ssh session."""


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold stop signals until the body ends, then deliver the first one held.

    Signals that are ignored stay ignored, as do those handled outside Python. Outside
    the main thread (where Python never runs a signal handler) the body simply runs.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous: dict[signal.Signals, Any] = {}
    try:
        for signum in STOP_SIGNALS:
            handler = signal.getsignal(signum)
            if handler is not None and handler is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, lambda signum, frame: held.append(signum))
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:
            signal.raise_signal(held[0])
