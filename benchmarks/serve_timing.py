"""Loaded by a vLLM server under benchmark: `RecordingScheduler` that also times itself.

    STEPSCOPE_BENCH_TIMING=/tmp/timing.json python -m vllm.entrypoints.openai.api_server \\
        ... --scheduler-cls serve_timing.TimedRecordingScheduler

The engine thread's CPU time (`time.thread_time_ns`) in the outermost `schedule()`
and `update_from_output()` calls — the recorder's work inside them included — is
summed, and a daemon thread writes the running totals to the file twice a second,
so a benchmark can read them before and after each load without stopping the
server. With them go the CPU time of the recorder's own threads (those named
`stepscope-*`: the row builder and the trace writer; a thread that ends counts what it
had used at the last write) and of the whole engine process, and the garbage collector's
runs on the engine thread (vLLM's server keeps it on, with its start-up heap frozen): how
many, how many of them full, and their CPU time. With `STEPSCOPE_TRACE` unset the class
records nothing: the stock scheduler, timed the same way.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from stepscope.tracer.vllm import RecordingScheduler

TIMING_ENV = "STEPSCOPE_BENCH_TIMING"
WRITE_INTERVAL_S = 0.5
RECORDER_THREADS = "stepscope-"


class TimedRecordingScheduler(RecordingScheduler):  # type: ignore[misc]
    """`RecordingScheduler` whose calls are timed on the engine thread."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timing = {
            "steps": 0, "schedule_ns": 0, "update_ns": 0, "gc_runs": 0, "gc_full_runs": 0,
            "gc_ns": 0, "gc_in_calls_ns": 0,
        }  # fmt: skip
        self._in_call = False
        """The engine thread is inside a timed call (a collection there counts in its time)."""
        for name in ("schedule", "update_from_output"):
            setattr(self, name, self._timed(name, getattr(self, name)))
        gc.callbacks.append(self._gc_callback(threading.get_ident()))
        threading.Thread(target=self._write_forever, daemon=True).start()

    def _gc_callback(self, engine_thread: int) -> Any:
        """A `gc.callbacks` entry that sums the collections run on the engine thread (the
        thread that builds the scheduler)."""
        timing, clock, started = self.timing, time.thread_time_ns, [0]

        def callback(phase: str, info: dict[str, int]) -> None:
            if threading.get_ident() != engine_thread:
                return
            if phase == "start":
                started[0] = clock()
                return
            used = clock() - started[0]
            timing["gc_ns"] += used
            if self._in_call:
                timing["gc_in_calls_ns"] += used
            timing["gc_runs"] += 1
            timing["gc_full_runs"] += info["generation"] == 2

        return callback

    def _timed(self, name: str, call: Any) -> Any:
        key = "schedule_ns" if name == "schedule" else "update_ns"
        timing, clock = self.timing, time.thread_time_ns

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            self._in_call = True
            try:
                return call(*args, **kwargs)
            finally:
                self._in_call = False
                timing[key] += clock() - started
                if name == "schedule":
                    timing["steps"] += 1

        return timed

    def _write_forever(self) -> None:
        path = Path(os.environ[TIMING_ENV])
        scratch = path.with_suffix(".tmp")
        recorder_threads: dict[int, int] = {}
        while True:
            _read_recorder_threads(recorder_threads)
            totals = {
                **self.timing,
                "recorder_ns": sum(recorder_threads.values()),
                "process_ns": time.process_time_ns(),
            }
            scratch.write_text(json.dumps(totals))
            scratch.replace(path)
            time.sleep(WRITE_INTERVAL_S)


def _read_recorder_threads(used: dict[int, int]) -> None:
    """The CPU time each live `stepscope-*` thread has used so far, by thread id."""
    for thread in threading.enumerate():
        if thread.name.startswith(RECORDER_THREADS) and thread.ident is not None:
            try:
                clock = time.pthread_getcpuclockid(thread.ident)
                used[thread.ident] = time.clock_gettime_ns(clock)
            except OSError:
                pass  # it ended since it was listed: its last reading stands
