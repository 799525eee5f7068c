"""Items made on a thread of their own, from the moment asked for, while this thread works.

DuckDB and Arrow let go of the GIL while they read and convert, so reading the next
range of a trace runs on the other core while the engine steps through the current
one. One item waits at a time: memory stays at about two of them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator
from dataclasses import dataclass
from typing import Generic, TypeVar

Item = TypeVar("Item")

_PUT_WAIT_S = 0.05
"""How often a producer waiting for room checks whether the reader closed."""


@dataclass(frozen=True, slots=True)
class _Made(Generic[Item]):
    """The producer's next item, its error, or (neither) its end."""

    item: Item | None = None
    error: BaseException | None = None
    end: bool = False


class ReadAhead(Generic[Item]):
    """Runs `produce` on a thread started now; `close()` (or the end) stops and closes it.

    Whatever `produce` reads must be safe to read from that thread: a DuckDB cursor
    made for it beforehand, not the connection this thread uses.
    """

    def __init__(self, produce: Generator[Item, None, None]) -> None:
        self._made: queue.Queue[_Made[Item]] = queue.Queue(maxsize=1)
        self._closed = threading.Event()
        self._done = False
        self._thread = threading.Thread(
            target=self._produce, args=(produce,), name="stepscope-read-ahead", daemon=True
        )
        self._thread.start()

    def __iter__(self) -> ReadAhead[Item]:
        return self

    def __next__(self) -> Item:
        if self._done:
            raise StopIteration
        made = self._made.get()
        if made.end or made.error is not None:
            self._done = True
            self.close()
            if made.error is not None:
                raise made.error
            raise StopIteration
        return made.item  # type: ignore[return-value]

    def close(self) -> None:
        """Stop producing and wait for the thread: nothing reads once this returns."""
        self._done = True
        self._closed.set()
        self._thread.join()

    def _produce(self, produce: Generator[Item, None, None]) -> None:
        try:
            for item in produce:
                if not self._put(_Made(item)):
                    return
        except BaseException as error:  # handed to the reader, raised there
            self._put(_Made(error=error))
            return
        finally:
            produce.close()
        self._put(_Made(end=True))

    def _put(self, made: _Made[Item]) -> bool:
        """Wait for room; False once the reader closed."""
        while not self._closed.is_set():
            try:
                self._made.put(made, timeout=_PUT_WAIT_S)
            except queue.Full:
                continue
            return True
        return False
