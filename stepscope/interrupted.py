"""Ctrl-C during a long query: one line, `interrupted`, and exit status 130, as a shell has it.

DuckDB looks for a signal only between the tasks of a query, and one task can run for
hours, so a thread woken by the signal itself (Python's wakeup fd) interrupts the query
at once. DuckDB then raises an error of its own (which one depends on its version):
whatever the command raises after Ctrl-C is taken for the interrupt.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import typer

from .exit_status import INTERRUPTED_EXIT_CODE


class CtrlC:
    """Ctrl-C as a command sees it: noted the moment it arrives, and passed on to a query."""

    def __init__(self) -> None:
        self._pressed = threading.Event()
        self._lock = threading.Lock()
        self._interrupt: Callable[[], None] | None = None

    @property
    def pressed(self) -> bool:
        return self._pressed.is_set()

    def interrupts(self, interrupt: Callable[[], None]) -> None:
        """Call `interrupt` (on another thread) when Ctrl-C arrives, e.g. `Trace.interrupt`."""
        with self._lock:
            self._interrupt = interrupt
        if self.pressed:
            interrupt()

    def arrived(self) -> None:
        """Ctrl-C arrived: note it and stop the query, if one was registered."""
        self._pressed.set()
        with self._lock:
            interrupt = self._interrupt
        if interrupt is not None:
            interrupt()

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """The Python-level handler, run on the main thread when it next runs Python code."""
        self._pressed.set()
        raise KeyboardInterrupt


@contextlib.contextmanager
def ctrl_c_is_one_line() -> Iterator[CtrlC]:
    """Run the body; Ctrl-C while it runs prints `interrupted` on stderr and exits 130."""
    ctrl_c = CtrlC()
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield ctrl_c  # started with Ctrl-C ignored (`nohup`, a background job): leave it so
        return
    previous = signal.signal(signal.SIGINT, ctrl_c.on_signal)
    try:
        with _woken_by_signals(ctrl_c):
            yield ctrl_c
    except BaseException:
        if not ctrl_c.pressed:
            raise
    finally:
        signal.signal(signal.SIGINT, previous)
    if ctrl_c.pressed:
        print("interrupted", file=sys.stderr)
        raise typer.Exit(INTERRUPTED_EXIT_CODE)


@contextlib.contextmanager
def _woken_by_signals(ctrl_c: CtrlC) -> Iterator[None]:
    """A thread that reads the signals Python's C handler writes to its wakeup fd."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    watcher = threading.Thread(target=_watch, args=(read_end, ctrl_c), daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        os.close(write_end)  # the watcher reads the end of the pipe and returns
        watcher.join()
        os.close(read_end)


def _watch(read_end: int, ctrl_c: CtrlC) -> None:
    while signals := os.read(read_end, 64):
        if signal.SIGINT in signals:
            ctrl_c.arrived()
