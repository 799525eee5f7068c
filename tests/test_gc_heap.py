"""A step loop keeps the heap it starts with out of the garbage collector's walks while it
runs, as vLLM's `EngineCore` does, and gives it back when it ends, however it ends."""

from __future__ import annotations

import gc
import threading

from conftest import TESTS
from stepscope.engine import EngineLoop, TapeModelRunner, Workload, load_workload

WORKLOAD = TESTS / "conformance" / "30_stress_fcfs.json"


def _loop(workload: Workload) -> EngineLoop:
    return EngineLoop(workload, TapeModelRunner.for_workload(workload))


def test_the_heap_is_frozen_while_the_loop_runs_and_given_back_after() -> None:
    workload = load_workload(WORKLOAD)
    counts = [gc.get_freeze_count() for _ in _loop(workload).run()]
    assert len(counts) > 10 and min(counts) > 0
    assert gc.get_freeze_count() == 0


def test_a_loop_left_midway_gives_the_heap_back() -> None:
    steps = _loop(load_workload(WORKLOAD)).run()
    next(steps)
    assert gc.get_freeze_count() > 0
    steps.close()
    assert gc.get_freeze_count() == 0


def test_the_heap_is_given_back_when_the_last_of_several_loops_ends() -> None:
    workload = load_workload(WORKLOAD)
    outer = _loop(workload).run()
    next(outer)
    for _ in _loop(workload).run():  # a loop inside another, as a replay's second look does
        pass
    assert gc.get_freeze_count() > 0
    seen: list[int] = []
    worker = threading.Thread(target=lambda: seen.extend(1 for _ in _loop(workload).run()))
    worker.start()
    worker.join()
    assert seen and gc.get_freeze_count() > 0
    for _ in outer:
        pass
    assert gc.get_freeze_count() == 0
