"""Drives vLLM's real scheduler for the tests; runs inside the vLLM venv (see vllm_env.py).

    python vllm_harness.py record OUT_DIR WORKLOAD.json... [--set KNOB=VALUE]...
    python vllm_harness.py settings WORKLOAD.json CLASS [--set KNOB=VALUE]...
    python vllm_harness.py priorities WORKLOAD.json CLASS
    python vllm_harness.py unsupported VERSION WORKLOAD.json CLASS
    python vllm_harness.py failing OUT WORKLOAD.json AFTER_STEPS [--set KNOB=VALUE]...
    python vllm_harness.py replay TRACE...
    python vllm_harness.py held OUT WORKLOAD.json [--set KNOB=VALUE]...
    python vllm_harness.py late_abort OUT WORKLOAD.json [--set KNOB=VALUE]...
    python vllm_harness.py tapped OUT WORKLOAD.json [--set KNOB=VALUE]...

`record` writes OUT_DIR/<stem>.duckdb per workload (vLLM's import is paid once).
`settings` builds the scheduler from CLASS (`module.Class`), which records only if
STEPSCOPE_TRACE says so, runs the workload, shuts the scheduler down and prints
what was wrapped; `priorities` builds it so and prints the nice value of the engine
thread and of each recorder thread (`stepscope-*`); `unsupported` does as `settings` with
vLLM reporting VERSION instead of its own. `failing` makes the recorder fail after
AFTER_STEPS steps and prints whether the run still finished. `replay` replays each trace
through vLLM and prints each diff's classification. `held` records the workload and prints the
requests the recording still keeps something for, those the scheduler has not
shipped as finished, and how many request endings the step loop held every 10 steps.
`tapped` records the workload and prints how many `allocate_slots` calls vLLM made, how
many of them went through the recording's wrapper, and how many steps preempted.
`late_abort` records the workload, then aborts its first request once the engine is
done, as vLLM's frontend does for a request it stopped on a stop string.
`behind` records the workload with a row builder slower than the engine (each step's
rows take `--builder-ms`, each engine step `--engine-ms`) and prints how many steps were
dropped. With STEPSCOPE_TRACE_SEGMENT set, `record` and `behind` write a recording folder
(`OUT_DIR/<stem>`) instead of a file.
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from stepscope.engine import Workload
from stepscope.engine.engine_loop import RequestFinish
from stepscope.engine.workload_file import load_workload
from stepscope.tracer.vllm.attach.start import attach_recording
from stepscope.tracer.vllm.drive.driver import (
    build_scheduler,
    prepare_environment,
    record_with_vllm,
)
from stepscope.tracer.vllm.drive.scripted_core import run_scripted

BEHIND_BACKLOG_STEPS = 32
"""`behind`'s backlog: a server's (`BACKLOG_STEPS`) is longer than a test workload."""

WRAPPED = (
    "add_request",
    "finish_requests",
    "schedule",
    "update_from_output",
    "_preempt_request",
    "_handle_blocked_waiting_request",
)


def _workload(path: str, knobs: dict[str, Any]) -> Workload:
    workload = load_workload(path)
    return workload.with_config(workload.config.with_knobs(knobs)) if knobs else workload


def _split(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    positional, knobs = [], {}
    args = iter(argv)
    for arg in args:
        if arg == "--set":
            name, _, value = next(args).partition("=")
            knobs[name] = json.loads(value)
        else:
            positional.append(arg)
    return positional, knobs


def _out(out_dir: str, path: str) -> Path:
    """Where a workload is recorded: a folder when segmented, else a file."""
    suffix = "" if os.environ.get("STEPSCOPE_TRACE_SEGMENT") else ".duckdb"
    return Path(out_dir) / f"{Path(path).stem}{suffix}"


def record(argv: list[str]) -> None:
    (out_dir, *paths), knobs = _split(argv)
    for path in paths:
        record_with_vllm(_workload(path, knobs), _out(out_dir, path))


def settings(argv: list[str]) -> None:
    (path, class_path), knobs = _split(argv)
    module, _, name = class_path.rpartition(".")
    workload = _workload(path, knobs)
    cls = getattr(importlib.import_module(module), name)
    scheduler, block_hasher = build_scheduler(workload, cls)
    recording = scheduler.stepscope_recording
    wrapped = sorted(n for n in WRAPPED if n in vars(scheduler))
    if "allocate_slots" in vars(scheduler.kv_cache_manager):
        wrapped.append("allocate_slots")
    run = run_scripted(workload, scheduler, block_hasher)
    scheduler.shutdown()
    print(
        json.dumps(
            {"recording": recording is not None, "wrapped": wrapped, "complete": run.complete}
        )
    )


def priorities(argv: list[str]) -> None:
    (path, class_path), knobs = _split(argv)
    module, _, name = class_path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    scheduler, _ = build_scheduler(_workload(path, knobs), cls)
    nice = {
        thread.name: os.getpriority(os.PRIO_PROCESS, thread.native_id)
        for thread in threading.enumerate()
        if thread.name.startswith("stepscope-") and thread.native_id is not None
    }
    nice["engine"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    scheduler.shutdown()
    print(json.dumps(nice))


def unsupported(argv: list[str]) -> None:
    import vllm

    version, *rest = argv
    vllm.__version__ = version
    settings(rest)


def failing(argv: list[str]) -> None:
    """Record, failing from the `after`+1-th call on at `where`: handing a step over (`step`,
    the default), or in the allocation tap, inside vLLM's `schedule()` (`admission`,
    `preemption`)."""
    (out, path, after, *where), knobs = _split(argv)
    workload = _workload(path, knobs)
    scheduler, block_hasher = build_scheduler(workload)
    recording = attach_recording(scheduler, Path(out), planned=workload)
    owner, name = {
        "step": (recording.recorder, "record_step_of"),
        "admission": (recording.tap, "_admitted"),
        "preemption": (recording.tap, "_preempted"),
    }[where[0] if where else "step"]
    works = getattr(owner, name)
    calls = {"n": 0}

    def work_then_fail(*args: Any) -> None:
        calls["n"] += 1
        if calls["n"] > int(after):
            raise OSError("disk full (injected)")
        works(*args)

    setattr(owner, name, work_then_fail)
    run = run_scripted(workload, scheduler, block_hasher, recording)
    recording.close()
    finished = sum(1 for r in scheduler.requests.values() if r.is_finished())
    outcome = {
        "complete": run.complete,
        "active": recording.active,
        "unfinished": len(scheduler.requests) - finished,
        "unwrapped": not any(name in vars(scheduler) for name in WRAPPED)
        and "allocate_slots" not in vars(scheduler.kv_cache_manager),
        "calls": calls["n"],
    }
    print(json.dumps(outcome))


def held(argv: list[str]) -> None:
    (out, path), knobs = _split(argv)
    workload = _workload(path, knobs)
    scheduler, block_hasher = build_scheduler(workload)
    recording = attach_recording(scheduler, Path(out), planned=workload)
    record_step_of = recording.recorder.record_step_of
    finishes: list[int] = []

    def record_and_count(step: int, *args: Any) -> None:
        record_step_of(step, *args)
        if step % 10 == 0:
            finishes.append(sum(1 for obj in gc.get_objects() if type(obj) is RequestFinish))

    recording.recorder.record_step_of = record_and_count  # type: ignore[method-assign]
    run_scripted(workload, scheduler, block_hasher, recording)
    recording.recorder.wait()  # what the builder thread keeps, once it has caught up
    kept = {
        "sampling": sorted(recording.steps.sampling),
        "admitted": sorted(recording.steps.admitted),
    }
    unshipped = sorted(set(scheduler.finished_req_ids) | set(scheduler.requests))
    recording.close()
    print(
        json.dumps(
            {"requests": len(workload.requests), "unshipped": unshipped, "finishes": finishes}
            | kept
        )
    )


def tapped(argv: list[str]) -> None:
    from stepscope.tracer.vllm.attach.allocation_tap import AllocationTap
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    (out, path), knobs = _split(argv)
    counts = {"calls": 0, "tapped": 0, "preempting_steps": 0}
    preempting: set[int] = set()

    def counted(cls: Any, name: str, key: str) -> None:
        method = getattr(cls, name)

        def count(*args: Any, **kwargs: Any) -> Any:
            counts[key] += 1
            return method(*args, **kwargs)

        setattr(cls, name, count)

    counted(KVCacheManager, "allocate_slots", "calls")
    counted(AllocationTap, "allocate_slots", "tapped")
    workload = _workload(path, knobs)
    scheduler, block_hasher = build_scheduler(workload)
    recording = attach_recording(scheduler, Path(out), planned=workload)
    preempt = scheduler._preempt_request

    def preempt_and_count(*args: Any, **kwargs: Any) -> Any:
        preempting.add(scheduler.current_step)
        return preempt(*args, **kwargs)

    scheduler._preempt_request = preempt_and_count
    run_scripted(workload, scheduler, block_hasher, recording)
    recording.close()
    print(json.dumps(counts | {"preempting_steps": len(preempting)}))


def late_abort(argv: list[str]) -> None:
    from vllm.v1.request import RequestStatus

    (out, path), knobs = _split(argv)
    workload = _workload(path, knobs)
    scheduler, block_hasher = build_scheduler(workload)
    recording = attach_recording(scheduler, Path(out), planned=workload)
    run_scripted(workload, scheduler, block_hasher, recording)
    first = workload.requests[0].request_id
    scheduler.finish_requests([first], RequestStatus.FINISHED_ABORTED)
    recording.close()


def behind(argv: list[str]) -> None:
    (out_dir, path, builder_ms, engine_ms), knobs = _split(argv)
    workload = _workload(path, knobs)
    scheduler, block_hasher = build_scheduler(workload)
    recording = attach_recording(scheduler, _out(out_dir, path), planned=workload)
    recording.recorder.lossless = False  # as a server's recorder: drop rather than wait
    recording.recorder.backlog_steps = BEHIND_BACKLOG_STEPS
    builder = recording.recorder.recorder
    record_step = builder.record_step

    def slow_builder(*args: Any) -> None:
        time.sleep(float(builder_ms) / 1e3)
        record_step(*args)

    builder.record_step = slow_builder  # type: ignore[method-assign]
    update = scheduler.update_from_output

    def slow_engine(*args: Any) -> Any:
        time.sleep(float(engine_ms) / 1e3)
        return update(*args)

    scheduler.update_from_output = slow_engine
    run = run_scripted(workload, scheduler, block_hasher, recording)
    dropped = recording.recorder.num_dropped_steps
    recording.close()
    print(json.dumps({"complete": run.complete, "dropped": dropped}))


def replay(argv: list[str]) -> None:
    from stepscope.replay.vllm_replay import replay_with_vllm

    outcomes = {path: str(replay_with_vllm(Path(path)).diff.classification) for path in argv}
    print(json.dumps(outcomes))


if __name__ == "__main__":
    prepare_environment()  # before anything imports vLLM
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    commands = {
        "record": record,
        "settings": settings,
        "priorities": priorities,
        "unsupported": unsupported,
        "failing": failing,
        "replay": replay,
        "held": held,
        "late_abort": late_abort,
        "tapped": tapped,
        "behind": behind,
    }
    commands[sys.argv[1]](sys.argv[2:])
