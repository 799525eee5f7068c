"""Run under vLLM 0.33.0 (see vllm_venv.py): one checkpoint of vLLM's live scheduler against
one of its steps, in the same state. Prints a JSON list of timings.

    python vllm_checkpoint_worker.py CASES.json SCRATCH_DIR

CASES.json is a list of {"name", "workload", "num_requests"}: the workload is stepped
(the fake model of `step_timer.py`) until `num_requests` run, then `DECODE_STEPS` more;
then `NUM_STEPS` steps are timed one by one (`schedule()` + `update_from_output()`, the
engine thread's CPU), and before every `CHECKPOINT_EVERY`-th of them a checkpoint's engine-thread
part (`VllmCheckpointer.at_iteration_start`: the snapshot and the hand-over to the row
builder), which also times, on its own thread, the conversion and the rows.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from step_timer import sampled_tokens
from stepscope.engine.workload import parse_workload
from stepscope.tracer.background import BackgroundRecorder
from stepscope.tracer.checkpoint_rows import checkpoint_tables
from stepscope.tracer.recorder import TraceRecorder
from stepscope.tracer.vllm.attach.checkpoint import take_snapshot
from stepscope.tracer.vllm.attach.checkpoint_interval import CheckpointInterval
from stepscope.tracer.vllm.attach.checkpointer import VllmCheckpointer
from stepscope.tracer.vllm.drive.driver import build_scheduler, prepare_environment
from vllm_inputs import arrivals, runner_output

DECODE_STEPS = 48
"""Steps after every request runs, before measuring: each has output tokens and decode blocks."""
NUM_STEPS = 25
CHECKPOINT_EVERY = 5
CLOCK = time.thread_time_ns


def step(scheduler: Any) -> int:
    """One engine step; the engine thread's CPU time of its schedule and update."""
    started = CLOCK()
    output = scheduler.schedule()
    scheduled = CLOCK()
    model_output = runner_output(sampled_tokens(scheduler, output))
    updating = CLOCK()
    scheduler.update_from_output(output, model_output)
    return scheduled - started + CLOCK() - updating


def measure(case: dict[str, Any], scratch: Path) -> dict[str, Any]:
    workload = parse_workload(json.dumps(case["workload"]), source=case["name"])
    scheduler, hasher = build_scheduler(workload, log_stats=False)
    for request in arrivals(workload, hasher)[0]:
        scheduler.add_request(request)
    while len(scheduler.running) < case["num_requests"]:
        step(scheduler)
    for _ in range(DECODE_STEPS):
        step(scheduler)
    trace = scratch / f"{case['name'].replace(' ', '_')}.duckdb"
    recorder = BackgroundRecorder(TraceRecorder(trace, workload, {"workload": case["name"]}))
    checkpointer = VllmCheckpointer(scheduler, recorder, CheckpointInterval(every_steps=1))
    step_ns, checkpoint_ns = [], []
    for index in range(NUM_STEPS):
        if index % CHECKPOINT_EVERY == 0:
            started = CLOCK()
            checkpointer.at_iteration_start(index + 1, {})
            checkpoint_ns.append(CLOCK() - started)
        step_ns.append(step(scheduler))
    off_thread = off_thread_ns(scheduler)
    recorder.close(complete=False)
    pool = scheduler.kv_cache_manager.block_pool
    return {
        "name": case["name"],
        "num_running": len(scheduler.running),
        "num_blocks": pool.num_gpu_blocks,
        "num_cached_blocks": len(pool.cached_block_hash_to_block),
        "step_us": statistics.median(step_ns) / 1e3,
        "checkpoint_us": statistics.median(checkpoint_ns) / 1e3,
        **off_thread,
    }


def off_thread_ns(scheduler: Any) -> dict[str, float]:
    """What the builder and writer threads do with one checkpoint: convert it, build its rows."""
    snapshot = take_snapshot(scheduler, 1, None, keyed_by_group=False)
    started = time.perf_counter_ns()
    checkpoint = snapshot.checkpoint()
    converted = time.perf_counter_ns()
    index = {rid: i for i, rid in enumerate(sorted(r.request_id for r in checkpoint.requests))}
    checkpoint_tables(checkpoint, index, 0)
    built = time.perf_counter_ns()
    return {"convert_us": (converted - started) / 1e3, "rows_us": (built - converted) / 1e3}


def main() -> None:
    prepare_environment()
    cases = json.loads(Path(sys.argv[1]).read_text())
    scratch = Path(sys.argv[2])
    print(json.dumps([measure(case, scratch) for case in cases]))


if __name__ == "__main__":
    main()
