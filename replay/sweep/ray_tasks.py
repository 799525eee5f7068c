"""Sweep points as Ray tasks, for grids bigger than one machine.

The trace goes into Ray's object store once and each task writes it to its own temporary
folder, so the nodes need no shared filesystem; a kept point's trace comes back the same
way. Every node needs stepscope installed; a `--scheduler` class from outside stepscope
travels with the tasks by value.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from stepscope.engine import InputError, Scheduler

from ..from_step import StepWindow
from .grid import SweepPoint
from .point import PointResult, PointTask, point_trace_name, run_point

INSTALL_HINT = "--ray needs Ray, an optional extra: pip install 'stepscope[ray]'"
LOCAL = "local"
"""`--ray local`: start a Ray instance on this machine for the sweep."""


def require_ray() -> None:
    """InputError with the install line when Ray is not installed."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise InputError(INSTALL_HINT) from None


def run_ray(address: str, task: PointTask, points: Sequence[SweepPoint]) -> Iterator[PointResult]:
    """Each point's result as its task completes; Ray is started here unless already running."""
    import ray

    started = not ray.is_initialized()
    if started:
        _connect(address)
    pending: list[Any] = []
    try:
        _ship_by_value(task.scheduler_cls)
        trace = ray.put(task.trace.read_bytes())
        remote = ray.remote(num_cpus=1)(_run_remote)
        cls = task.scheduler_cls
        window = task.window
        pending = [remote.remote(trace, cls, window, p, p.index in task.keep) for p in points]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            result, data = ray.get(done[0])
            yield _landed(task, result, data)
    finally:
        for ref in pending:
            ray.cancel(ref)
        if started:
            ray.shutdown()


def _connect(address: str) -> None:
    import ray

    quiet: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    try:
        if address == LOCAL:
            ray.init(include_dashboard=False, **quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise InputError(f"--ray {address}: cannot connect: {error}") from None


def _ship_by_value(scheduler_cls: type[Scheduler] | None) -> None:
    """A scheduler from the user's own module is pickled with its code: nodes lack the file."""
    from ray import cloudpickle

    if scheduler_cls is None or scheduler_cls.__module__.startswith("stepscope."):
        return
    module = sys.modules.get(scheduler_cls.__module__)
    if module is not None and module.__name__ != "__main__":
        register = cast(Callable[[ModuleType], None], cloudpickle.register_pickle_by_value)
        register(module)


# Ray's typed `remote()` passes a task's arguments by position only.
def _run_remote(
    trace: bytes,
    scheduler_cls: type[Scheduler] | None,
    window: StepWindow,
    point: SweepPoint,
    keep: bool,  # noqa: FBT001
) -> tuple[PointResult, bytes | None]:
    """One point on a Ray worker: the trace written locally, the kept trace read back."""
    with tempfile.TemporaryDirectory(prefix="stepscope-sweep-") as folder:
        local = Path(folder) / "trace.duckdb"
        local.write_bytes(trace)
        keep_set = frozenset({point.index}) if keep else frozenset()
        task = PointTask(local, scheduler_cls, Path(folder), keep_set, window)
        result = run_point(task, point)
        data = result.trace.read_bytes() if result.trace is not None else None
    return dataclasses.replace(result, trace=None), data


def _landed(task: PointTask, result: PointResult, data: bytes | None) -> PointResult:
    """The result with its kept trace written into this sweep's work folder."""
    if data is None:
        return result
    path = task.work_dir / point_trace_name(result.index)
    path.write_bytes(data)
    return dataclasses.replace(result, trace=path)
