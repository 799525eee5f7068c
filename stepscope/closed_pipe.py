"""Standard output that survives the reader going away (`stepscope replay T | head`).

When the pipe closes, the rest of the output goes to /dev/null, as Python's
documentation on SIGPIPE recommends, and the command runs to its end: its exit
status is that of the work (a divergence still exits 1), never one made up by
the broken pipe. A command whose work is the output itself (`stepscope sql`) asks
`reader_gone` and stops.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO


class ClosedPipeSafe:
    """Wraps a text stream; a write to a closed pipe sends the stream to /dev/null instead."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()
            self._stream.flush()

    def _to_devnull(self) -> None:
        """Point the stream's file descriptor at /dev/null; what it still buffers goes there."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)
        self.reader_gone = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def reader_gone(stream: TextIO) -> bool:
    """Whether `stream` is standard output whose pipe has closed (its writes now go nowhere)."""
    return isinstance(stream, ClosedPipeSafe) and stream.reader_gone


@contextlib.contextmanager
def closed_pipe_safe_stdout() -> Iterator[None]:
    """Run the body with `sys.stdout` wrapped in `ClosedPipeSafe`, flushed at the end."""
    stdout = sys.stdout
    sys.stdout = ClosedPipeSafe(stdout)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = stdout
