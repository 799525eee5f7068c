"""Sweep points on this machine: in this process for one job, else in worker processes.

Workers are started fresh (forkserver, or spawn where there is none), never forked from a
process that may hold DuckDB connections and threads; they inherit `sys.path`, so a
`--scheduler` loaded from the working directory imports there too.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed

from .sweep_grid import SweepPoint
from .sweep_point import PointResult, PointTask, run_point


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_local(task: PointTask, points: Sequence[SweepPoint], jobs: int) -> Iterator[PointResult]:
    """Each point's result as it completes (in any order)."""
    if jobs <= 1 or len(points) <= 1:
        for point in points:
            yield run_point(task, point)
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with ProcessPoolExecutor(min(jobs, len(points)), mp_context=context) as pool:
        futures = [pool.submit(run_point, task, point) for point in points]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            _cancel(futures)


def _cancel(futures: list[Future[PointResult]]) -> None:
    """Points not started yet are dropped when the sweep stops early (an error, Ctrl-C)."""
    for future in futures:
        future.cancel()
