"""`ReadAhead` hands over what its thread made, in order, with its errors, and stops when closed."""

from __future__ import annotations

import threading
from collections.abc import Generator

import pytest
from stepscope.replay.read_ahead import ReadAhead


def test_items_come_in_order_made_on_another_thread() -> None:
    threads: set[str] = set()

    def produce() -> Generator[int, None, None]:
        for item in range(50):
            threads.add(threading.current_thread().name)
            yield item

    assert list(ReadAhead(produce())) == list(range(50))
    assert threads == {"stepscope-read-ahead"}


def test_an_error_while_producing_is_raised_to_the_reader_after_the_items_before_it() -> None:
    def produce() -> Generator[int, None, None]:
        yield 1
        raise ValueError("bad block")

    read = ReadAhead(produce())
    assert next(read) == 1
    with pytest.raises(ValueError, match="bad block"):
        next(read)
    with pytest.raises(StopIteration):
        next(read)


def test_closing_early_stops_the_producer_and_closes_it() -> None:
    made: list[int] = []
    closed = threading.Event()
    producers: list[threading.Thread] = []

    def produce() -> Generator[int, None, None]:
        producers.append(threading.current_thread())
        try:
            for item in range(1_000_000):
                made.append(item)
                yield item
        finally:
            closed.set()

    read = ReadAhead(produce())
    assert next(read) == 0
    read.close()
    assert closed.is_set()  # close() returned after the producer's own cleanup
    assert len(made) <= 3  # one handed over, one waiting, one being put
    assert not producers[0].is_alive()
    assert list(read) == []  # nothing more once closed, and no wait for it
