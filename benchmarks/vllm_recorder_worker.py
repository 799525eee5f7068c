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

from step_timer import sampled_tokens
from stepscope.engine.workload import parse_workload
from stepscope.tracer.vllm.driver import build_scheduler, make_request, prepare_environment

VARIANTS = ("stock", "off", "on")


def run_once(case: dict[str, Any], variant: str, scratch: Path) -> dict[str, float]:
    from stepscope.tracer.vllm.attach import attach_recording
    from stepscope.tracer.vllm.schedulers import RecordingScheduler
    from vllm.v1.outputs import ModelRunnerOutput

    workload = parse_workload(json.dumps(case["workload"]), source=case["name"])
    cls = RecordingScheduler if variant == "off" else None
    scheduler, hasher = build_scheduler(workload, cls)
    recording = None
    if variant == "on":
        path = scratch / f"{case['name'].replace(' ', '_')}-{time.monotonic_ns()}.duckdb"
        recording = attach_recording(scheduler, path, planned=workload)
    arrivals: dict[int, list[Any]] = {}
    for spec in workload.requests:
        arrivals.setdefault(spec.arrival_step, []).append(make_request(spec, hasher))
    last_arrival = max(arrivals, default=0)
    thread_ns = measured = 0
    clock = time.thread_time_ns
    gc.collect()
    gc.disable()
    process_started = time.process_time_ns()
    try:
        for step in range(case["measure_from"] + case["num_steps"]):
            for request in arrivals.get(step, ()):
                scheduler.add_request(request)
            if not scheduler.has_requests():
                if step > last_arrival:
                    break
                continue
            t0 = clock()
            output = scheduler.schedule()
            t1 = clock()
            sampled = sampled_tokens(scheduler, output)
            req_ids = list(sampled)
            runner_output = ModelRunnerOutput(
                req_ids=req_ids,
                req_id_to_index={req_id: i for i, req_id in enumerate(req_ids)},
                sampled_token_ids=[sampled[req_id] for req_id in req_ids],
            )
            t2 = clock()
            scheduler.update_from_output(output, runner_output)
            t3 = clock()
            if step >= case["measure_from"]:
                thread_ns += (t1 - t0) + (t3 - t2)
                measured += 1
        if recording is not None:
            recording.close()
    finally:
        gc.enable()
    process_ns = time.process_time_ns() - process_started
    return {
        "step_us": thread_ns / max(measured, 1) / 1e3,
        "run_ms": process_ns / 1e6,
        "steps": measured,
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
