"""Run by the vLLM venv's interpreter: vLLM's scheduler stock and recorded, stepped in
lockstep in one process. Prints a JSON list of timings.

    python vllm_engine_thread_worker.py CASES.json REPEATS MODEL_MS SEGMENT [PARTS_OFF] SCRATCH_DIR

Two schedulers of the same case, one stock and one recorded, take a step each in turn
(which goes first alternates), so whatever else loads the machine loads both alike. Per
step, the engine thread's CPU time (`time.thread_time_ns`) of `schedule()` +
`update_from_output()`; between the two, a pause of MODEL_MS milliseconds stands for
the model (the GIL released, as a server's forward pass mostly does: the recorder's
builder thread runs then, and each step starts with cold caches). The garbage collector
is off while stepping. SEGMENT (empty: one file) records as a flight recorder, a folder of
segments that long. PARTS_OFF (comma-separated, or `none`; `recorder_parts.py`) switches
parts of the recorder off. Per repeat, recorded / stock, and the CPU per step of the
recorder's own threads (its row builder and trace writer); medians and spread over repeats.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from step_timer import sampled_tokens
from stepscope.engine.workload import parse_workload
from stepscope.tracer.vllm.drive.driver import build_scheduler, prepare_environment
from vllm_inputs import arrivals, runner_output

CLOCK = time.thread_time_ns


class Side:
    """One scheduler of the pair, and the engine-thread CPU its steps took."""

    def __init__(
        self, case: dict[str, Any], scratch: Path, *, recorded: bool, segmented: bool
    ) -> None:
        from stepscope.tracer.vllm.attach.start import attach_recording

        workload = parse_workload(json.dumps(case["workload"]), source=case["name"])
        self.scheduler, hasher = build_scheduler(workload)
        self.recording = None
        if recorded:
            name = f"{case['name'].replace(' ', '_')}-{time.monotonic_ns()}"
            path = scratch / (name if segmented else f"{name}.duckdb")
            self.recording = attach_recording(self.scheduler, path, planned=workload)
        self.arrivals = arrivals(workload, hasher)
        self.busy_ns = 0
        self.steps = 0
        self.done = False

    def step(self, step: int, pause_s: float) -> None:
        scheduler = self.scheduler
        for request in self.arrivals.get(step, ()):
            scheduler.add_request(request)
        if not scheduler.has_requests():
            self.done = True
            return
        started = CLOCK()
        output = scheduler.schedule()
        scheduled = CLOCK()
        model_output = runner_output(sampled_tokens(scheduler, output))
        if pause_s:
            time.sleep(pause_s)
        updating = CLOCK()
        scheduler.update_from_output(output, model_output)
        self.busy_ns += scheduled - started + CLOCK() - updating
        self.steps += 1

    @property
    def step_us(self) -> float:
        return self.busy_ns / max(self.steps, 1) / 1e3


def run_pair(
    case: dict[str, Any], pause_s: float, scratch: Path, *, segmented: bool
) -> tuple[float, float, float]:
    """(stock, recorded) engine-thread µs per step, and the recorder's own threads' (the row
    builder and the trace writer, its close left out)."""
    sides = [
        Side(case, scratch, recorded=False, segmented=segmented),
        Side(case, scratch, recorded=True, segmented=segmented),
    ]
    gc.collect()
    gc.disable()
    try:
        step = 0
        while not all(side.done for side in sides):
            for side in sides if step % 2 == 0 else sides[::-1]:
                if not side.done:
                    side.step(step, pause_s)
            step += 1
    finally:
        gc.enable()
    recording = sides[1].recording
    assert recording is not None and recording.active, "the recording failed"
    recording.recorder.wait()  # the builder's and the writer's work for these steps is done
    recorder_ns = recorder_threads_ns()
    recording.close()
    return sides[0].step_us, sides[1].step_us, recorder_ns / max(sides[1].steps, 1) / 1e3


def recorder_threads_ns() -> int:
    """The CPU time the recorder's threads (named `stepscope-*`) have used so far."""
    return sum(
        time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident))
        for thread in threading.enumerate()
        if thread.name.startswith("stepscope-") and thread.ident is not None
    )


def main() -> None:
    prepare_environment()
    cases = json.loads(Path(sys.argv[1]).read_text())
    repeats, pause_s = int(sys.argv[2]), float(sys.argv[3]) / 1e3
    segment, scratch = sys.argv[4], Path(sys.argv[-1])
    if len(sys.argv) > 6:
        from recorder_parts import switch_off

        switch_off(set(sys.argv[5].split(",")) - {"none"})
    if segment:  # imported only here: an older checkout (a baseline) may lack segments
        from stepscope.tracer.vllm.attach.settings import SEGMENT_ENV

        os.environ[SEGMENT_ENV] = segment
    results = []
    for case in cases:
        pairs = [run_pair(case, pause_s, scratch, segmented=bool(segment)) for _ in range(repeats)]
        ratios = [recorded / stock for stock, recorded, _ in pairs]
        results.append(
            {
                "name": case["name"],
                "stock_step_us": statistics.median(stock for stock, _, _ in pairs),
                "recorded_step_us": statistics.median(recorded for _, recorded, _ in pairs),
                "recorder_threads_step_us": statistics.median(threads for *_, threads in pairs),
                "ratio": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
            }
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
