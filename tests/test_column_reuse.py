"""Column buffers reuse their memory batch after batch, never under a batch still held."""

from __future__ import annotations

from stepscope.tracer.columns import IntColumn, OptionalIntColumn, SeqColumn
from stepscope.tracer.filled_array import FilledArray


def test_a_batch_held_by_arrow_keeps_its_rows_while_the_next_batches_fill() -> None:
    column = IntColumn("q")
    column.extend([1, 2, 3])
    first = column.to_arrow()
    column.reset()
    for value in range(10, 14):
        column.extend([value] * 3)
        column.to_arrow()  # dropped at once: its memory may be reused
        column.reset()
    assert first.to_pylist() == [1, 2, 3]


def test_memory_is_reused_once_no_batch_holds_it() -> None:
    values = FilledArray("i")
    for value in range(1000):
        values.append(value)
    held = values.view()
    first = values.values
    values.start_over()
    assert values.values is not first  # the held batch's array is not written again
    del held
    values.start_over()
    assert values.values is first


def test_rows_past_the_reused_room_grow_the_array() -> None:
    column = SeqColumn()
    column.extend_range(0, 4)
    column.reset()
    column.extend_range(100, 110)
    column.append(500)
    assert column.to_arrow().to_pylist() == [*range(100, 110), 500]


def test_a_failed_step_s_rows_are_dropped_before_the_batch() -> None:
    column = OptionalIntColumn("i")
    column.extend([5, OptionalIntColumn.MISSING])
    column.extend([7, 8, 9])
    column.truncate(2)
    assert column.to_arrow().to_pylist() == [5, None]
