"""CPU time per step of `schedule()` and `update_from_output()`: stepscope next to vLLM 0.33.0.

    python benchmarks/scheduler_cost.py [--results benchmarks/RESULTS.md] [--quick]

Workloads: (a) N requests decoding together (N = 64, 256, 1024; prompt 128, block
size 16, budget 8192, max_num_seqs 1024, prefix caching on, no preemption), timed
once every request is decoding; (b) a mixed load with staggered arrivals, prompts
64–2048, outputs 16–256 and a KV pool tight enough to preempt, timed over the whole
run. Where the vLLM venv exists (`.ci/vllm-venv` builds it), the same workloads run
through vLLM's own scheduler in a subprocess of the same run and the ratio
stepscope / vLLM is printed (goal: at most 0.8).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import vllm_venv
from results import heading, write_section
from step_timer import time_steps
from stepscope.engine import ModelRunnerOutput, Scheduler
from stepscope.engine.workload import parse_workload
from workloads import decode_case, mixed_case

GOAL = 0.8


def time_stepscope(case: dict[str, Any]) -> dict[str, Any]:
    workload = parse_workload(json.dumps(case["workload"]), source=case["name"])
    scheduler = Scheduler(workload.config)
    arrivals: dict[int, list[Any]] = {}
    for spec in workload.requests:
        request = spec.make_request(scheduler.block_hasher)
        arrivals.setdefault(spec.arrival_step, []).append(request)
    timing = time_steps(
        scheduler,
        arrivals,
        ModelRunnerOutput.from_sampled,
        case["measure_from"],
        case["num_steps"],
    )
    return {"name": case["name"], **timing}


def time_vllm(cases: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    if not vllm_venv.available():
        return None
    timings: list[dict[str, Any]] = vllm_venv.run_worker("vllm_scheduler_cost.py", cases)
    return timings


def table(ours: list[dict[str, Any]], theirs: list[dict[str, Any]] | None) -> str:
    header = "| workload | steps | preemptions | stepscope schedule / update (µs) |"
    if theirs is not None:
        header = header.replace("| preemptions |", "| preemptions (ours / vLLM) |")
    rule = "|---|---:|---:|---:|"
    if theirs is not None:
        header += " vLLM schedule / update (µs) | ratio (total) |"
        rule += "---:|---:|"
    lines = [header, rule]
    for index, mine in enumerate(ours):
        preemptions = str(mine["preemptions"])
        if theirs is not None:
            preemptions += f" / {theirs[index]['preemptions']}"
        row = (
            f"| {mine['name']} | {mine['steps']} | {preemptions} | "
            f"{mine['schedule_us']:.1f} / {mine['update_us']:.1f} |"
        )
        if theirs is not None:
            other = theirs[index]
            ratio = (mine["schedule_us"] + mine["update_us"]) / (
                other["schedule_us"] + other["update_us"]
            )
            mark = "ok" if ratio <= GOAL else "over goal"
            row += (
                f" {other['schedule_us']:.1f} / {other['update_us']:.1f} | {ratio:.2f} ({mark}) |"
            )
        lines.append(row)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    args = parser.parse_args()
    num_steps = 20 if args.quick else 200
    cases = [decode_case(n, num_steps) for n in (64, 256, 1024)]
    cases.append(mixed_case(40 if args.quick else 400))
    ours = [time_stepscope(case) for case in cases]
    theirs = time_vllm(cases)
    text = table(ours, theirs)
    if theirs is None:
        text += "\n\nvLLM not available (build its venv with .ci/vllm-venv to compare)."
    print(text)
    if args.results:
        intro = (
            f"{heading('scheduler_cost.py')}\n\n"
            "CPU time per step (mean over the measured steps); vLLM 0.33.0's `Scheduler` "
            "with scheduler stats off, run in the same invocation. Ratio = stepscope / vLLM "
            f"of schedule + update; goal ≤ {GOAL}.\n\n"
        )
        write_section(args.results, "scheduler_cost", intro + text)


if __name__ == "__main__":
    main()
