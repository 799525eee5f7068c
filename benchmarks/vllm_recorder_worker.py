"""Run by the vLLM venv's interpreter: vLLM's scheduler stock, with the recording class
switched off, and recorded. Prints a JSON list of timings.

    python vllm_recorder_worker.py CASES.json REPEATS SCRATCH_DIR

Per step, the engine thread's CPU time in `schedule()` + `update_from_output()` (the
recorder's work happens inside both wrappers); per run, the whole process's CPU time,
which adds the recorder's background writer. Variants alternate within each repeat;
figures are medians over the repeats.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from step_timer import time_steps
from stepscope.engine.workload import parse_workload
from stepscope.tracer.vllm.drive.driver import build_scheduler, prepare_environment
from vllm_inputs import arrivals, runner_output

VARIANTS = ("stock", "off", "on")


def run_once(case: dict[str, Any], variant: str, scratch: Path) -> dict[str, float]:
    from stepscope.tracer.vllm.attach.schedulers import RecordingScheduler
    from stepscope.tracer.vllm.attach.start import attach_recording

    workload = parse_workload(json.dumps(case["workload"]), source=case["name"])
    cls = RecordingScheduler if variant == "off" else None
    scheduler, hasher = build_scheduler(workload, cls)
    recording = None
    if variant == "on":
        path = scratch / f"{case['name'].replace(' ', '_')}-{time.monotonic_ns()}.duckdb"
        recording = attach_recording(scheduler, path, planned=workload)
    by_step = arrivals(workload, hasher)
    gc.collect()  # before the process clock starts (time_steps collects again, cheaply)
    process_started = time.process_time_ns()
    timing = time_steps(
        scheduler,
        by_step,
        runner_output,
        case["measure_from"],
        case["num_steps"],
        clock=time.thread_time_ns,
    )
    if recording is not None:
        recording.close()
    process_ns = time.process_time_ns() - process_started
    return {
        "step_us": timing["schedule_us"] + timing["update_us"],
        "run_ms": process_ns / 1e6,
        "steps": timing["steps"],
    }


def main() -> None:
    prepare_environment()
    cases = json.loads(Path(sys.argv[1]).read_text())
    repeats, scratch = int(sys.argv[2]), Path(sys.argv[3])
    results = []
    for case in cases:
        runs: dict[str, list[dict[str, float]]] = {variant: [] for variant in VARIANTS}
        for _ in range(repeats):
            for variant in VARIANTS:
                runs[variant].append(run_once(case, variant, scratch))
        summary: dict[str, Any] = {"name": case["name"], "steps": runs["stock"][0]["steps"]}
        for variant, measured in runs.items():
            summary[f"{variant}_step_us"] = statistics.median(r["step_us"] for r in measured)
            summary[f"{variant}_run_ms"] = statistics.median(r["run_ms"] for r in measured)
        results.append(summary)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
