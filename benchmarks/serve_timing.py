"""Loaded by a vLLM server under benchmark: `RecordingScheduler` that also times itself.

    STEPSCOPE_BENCH_TIMING=/tmp/timing.json python -m vllm.entrypoints.openai.api_server \\
        ... --scheduler-cls serve_timing.TimedRecordingScheduler

The engine thread's CPU time (`time.thread_time_ns`) in the outermost `schedule()`
and `update_from_output()` calls — the recorder's work inside them included — is
summed, and a daemon thread writes the running totals to the file twice a second,
so a benchmark can read them before and after each load without stopping the
server. With `STEPSCOPE_TRACE` unset the class records nothing: the stock
scheduler, timed the same way.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from stepscope.tracer.vllm import RecordingScheduler

TIMING_ENV = "STEPSCOPE_BENCH_TIMING"
WRITE_INTERVAL_S = 0.5


class TimedRecordingScheduler(RecordingScheduler):  # type: ignore[misc]
    """`RecordingScheduler` whose calls are timed on the engine thread."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timing = {"steps": 0, "schedule_ns": 0, "update_ns": 0}
        for name in ("schedule", "update_from_output"):
            setattr(self, name, self._timed(name, getattr(self, name)))
        threading.Thread(target=self._write_forever, daemon=True).start()

    def _timed(self, name: str, call: Any) -> Any:
        key = "schedule_ns" if name == "schedule" else "update_ns"
        timing, clock = self.timing, time.thread_time_ns

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            try:
                return call(*args, **kwargs)
            finally:
                timing[key] += clock() - started
                if name == "schedule":
                    timing["steps"] += 1

        return timed

    def _write_forever(self) -> None:
        path = Path(os.environ[TIMING_ENV])
        scratch = path.with_suffix(".tmp")
        while True:
            scratch.write_text(json.dumps(self.timing))
            scratch.replace(path)
            time.sleep(WRITE_INTERVAL_S)
