"""SIGTERM and SIGHUP stop a command as Ctrl-C does: its cleanup runs, then it exits 128 + N.

CI cancelling a job, `timeout`, `docker stop` and a dropped ssh session send them;
Python's default is to die on the spot, leaving a trace's write-ahead log and
half-written temporary files behind. Raised as `StopSignal`, a `KeyboardInterrupt`,
they take the path Ctrl-C takes: every `finally` and `except KeyboardInterrupt` on
the way out runs. A second stop while that cleanup runs is ignored.
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, ParamSpec, TypeVar

from stepscope.tracer.held_signals import STOP_SIGNALS

_P = ParamSpec("_P")
_R = TypeVar("_R")


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread where Ctrl-C raises KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stop_reason(stop: KeyboardInterrupt) -> str:
    """How a stopped command's last line begins."""
    if isinstance(stop, StopSignal):
        return f"stopped by {signal.Signals(stop.signum).name}"
    return "interrupted"


@contextmanager
def stop_like_ctrl_c() -> Iterator[None]:
    """In the body, SIGTERM and SIGHUP raise `StopSignal`; the process then exits 128 + N.

    The first stop (Ctrl-C included) raises; later ones are ignored from then on, so
    neither the cleanup nor the process's exit is cut short. Whatever the body then
    raises, the exit status is the stop's: DuckDB turns a stop during a query into its
    own error. Signals already ignored (`nohup`) stay so.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stops: list[int] = []

    def on_stop(signum: int, frame: FrameType | None) -> None:
        if stops:
            return
        stops.append(signum)
        raise KeyboardInterrupt if signum == signal.SIGINT else StopSignal(signum)

    previous: dict[signal.Signals, Any] = {}
    try:
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
                previous[signum] = signal.signal(signum, on_stop)
        yield
    except BaseException:
        if stops:
            raise SystemExit(128 + stops[0]) from None
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_IGN if stops else handler)


def stops_like_ctrl_c(command: Callable[_P, _R]) -> Callable[_P, _R]:
    """A CLI command run inside `stop_like_ctrl_c()`."""

    @functools.wraps(command)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with stop_like_ctrl_c():
            return command(*args, **kwargs)

    return run
