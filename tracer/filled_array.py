"""An `array.array` filled from the front, whose memory is reused batch after batch.

A step appends to a dozen typed columns in turn. Arrays that grow side by side
keep moving in memory as they outgrow their mappings (`benchmarks/RESULTS.md`,
tracer_overhead), and a fresh array per batch faults
in every page again. Here a batch's array is handed to Arrow without a copy, and
taken back for a later batch once no Arrow buffer holds it any more.
"""

from __future__ import annotations

from array import array

import pyarrow as pa

_ARROW_INT = {"b": pa.int8(), "i": pa.int32(), "q": pa.int64()}
_MAX_HANDED = 8
"""Arrays kept for reuse: the writer's queue holds at most a few batches."""


class FilledArray:
    """`values[:size]` are the rows; the rest is room for the next ones."""

    __slots__ = ("_handed", "size", "typecode", "values")

    def __init__(self, typecode: str) -> None:
        self.typecode = typecode
        self.values: array[int] = array(typecode)
        self.size = 0
        self._handed: list[array[int]] = []

    def append(self, value: int) -> None:
        size = self.size
        if size == len(self.values):
            self._grow(size + 1)
        self.values[size] = value
        self.size = size + 1

    def put(self, chunk: array[int]) -> None:
        """Append `chunk` (of this typecode)."""
        start = self.size
        end = start + len(chunk)
        if end > len(self.values):
            self._grow(end)
        self.values[start:end] = chunk
        self.size = end

    def _grow(self, size: int) -> None:
        """Room for `size` rows at least, doubling: an array grows a few times, not every step."""
        room = len(self.values)
        self.values.extend(array(self.typecode, [0]) * max(size - room, room))

    def truncate(self, size: int) -> None:
        self.size = size

    def view(self) -> pa.Array:
        """The rows as an Arrow array over this array's memory (no copy).

        The array is not written again while any Arrow buffer over it is alive.
        """
        buffer = pa.py_buffer(self.values)
        return pa.Array.from_buffers(_ARROW_INT[self.typecode], self.size, [None, buffer])

    def start_over(self) -> None:
        """Empty, in an array no Arrow buffer holds: a handed-over one if one is free."""
        handed = self._handed
        handed.append(self.values)
        for index, values in enumerate(handed):
            if not _exported(values):
                self.values = handed.pop(index)
                break
        else:
            self.values = array(self.typecode, [0]) * len(handed[-1])
        del handed[:-_MAX_HANDED]
        self.size = 0


def _exported(values: array[int]) -> bool:
    """Whether a buffer over `values` is alive (an exported array refuses to change size)."""
    try:
        values.append(0)
    except BufferError:
        return True
    values.pop()
    return False
