"""What recording real vLLM costs: vLLM 0.33.0's scheduler stock, with the recording class
switched off, and recorded into a trace.

    python benchmarks/vllm_recorder_overhead.py [--results benchmarks/RESULTS.md] [--quick]

Runs in the vLLM venv that `.ci/vllm-venv` builds (this checkout's stepscope is
installed into a scratch directory for it). Workloads: N requests decoding together
(N = 64, 256) and a mixed load with staggered arrivals and preemptions. Two ratios
against the stock class: the engine thread's CPU per step (what a server's scheduling
loop pays: the wrappers, the conversions, the rows), and the whole process's CPU per
run (adding the background DuckDB writer, which a spare core absorbs). Goals:
recording off costs nothing (ratio 1.00 within noise); recording on stays under 1.25
on the engine thread.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import vllm_venv
from results import heading, write_section
from workloads import decode_case, mixed_case

GOAL_OFF = 1.02
GOAL_ON = 1.25


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| workload | steps | stock µs/step | off µs/step | on µs/step | off / stock | "
        "on / stock (engine thread) | on / stock (process CPU) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        off = row["off_step_us"] / row["stock_step_us"]
        on = row["on_step_us"] / row["stock_step_us"]
        process = row["on_run_ms"] / row["stock_run_ms"]
        off_mark = "ok" if off <= GOAL_OFF else "over goal"
        on_mark = "ok" if on <= GOAL_ON else "over goal"
        lines.append(
            f"| {row['name']} | {row['steps']} | {row['stock_step_us']:.0f} | "
            f"{row['off_step_us']:.0f} | {row['on_step_us']:.0f} | {off:.3f} ({off_mark}) | "
            f"{on:.3f} ({on_mark}) | {process:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    args = parser.parse_args()
    if not vllm_venv.available():
        sys.exit(f"no vLLM venv at {vllm_venv.VENV}: build it with .ci/vllm-venv")
    num_steps = 20 if args.quick else 150
    cases = [decode_case(n, num_steps) for n in (64, 256)]
    cases.append(mixed_case(30 if args.quick else 150))
    rows = vllm_venv.run_worker("vllm_recorder_worker.py", cases, str(1 if args.quick else 3))
    text = table(rows)
    print(text)
    if args.results:
        intro = (
            f"{heading('vllm_recorder_overhead.py')}\n\n"
            "vLLM 0.33.0's `Scheduler` stock, as `RecordingScheduler` with STEPSCOPE_TRACE "
            "unset (off), and recorded (on), alternating in one invocation; medians of 3. "
            f"Goals: off / stock ≤ {GOAL_OFF}, on / stock ≤ {GOAL_ON} on the engine "
            "thread.\n\n"
        )
        write_section(args.results, "vllm_recorder_overhead", intro + text)


if __name__ == "__main__":
    main()
