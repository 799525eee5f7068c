"""Sweep points on this machine: in this process for one job, else in worker processes.

Workers are started fresh (forkserver, or spawn where there is none), never forked from a
process that may hold DuckDB connections and threads; they inherit `sys.path`, so a
`--scheduler` loaded from the working directory imports there too. A sweep stopped early
ends its workers itself, without waiting for the points they run.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import forkserver, resource_tracker
from multiprocessing.context import BaseContext

from .grid import SweepPoint
from .point import PointResult, PointTask, run_point


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
    _start_helpers_deaf_to_hangup(context)
    with ProcessPoolExecutor(min(jobs, len(points)), mp_context=context) as pool:
        try:
            futures = [pool.submit(run_point, task, point) for point in points]
            for future in as_completed(futures):
                yield future.result()
        except BaseException:
            _stop_workers(pool)
            raise


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """When the sweep stops early (an error, Ctrl-C, a stop signal), end its workers and wait
    until they have: points still running are not waited for, points not started are
    dropped, and the work folder is removed with no worker writing into it."""
    workers = list(pool._processes.values())  # Python 3.11 has no public way to them
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join()


def _start_helpers_deaf_to_hangup(context: BaseContext) -> None:
    """Start multiprocessing's helper processes (its resource tracker; the forkserver, whose
    forks are the workers) with SIGHUP blocked: a closed terminal then stops the sweep
    through this process alone. A tracker the hangup killed would be started again and
    print a traceback for each resource it no longer knows."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        resource_tracker.ensure_running()
        if context.get_start_method() == "forkserver":
            forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
