"""What a checkpoint costs vLLM's engine thread: one snapshot of its live scheduler against
one `schedule()` + `update_from_output()`, in the same state, and amortised over intervals.

    python benchmarks/vllm_checkpoint_cost.py [--results benchmarks/RESULTS.md] [--quick]

Runs in the vLLM venv that `.ci/vllm-venv` builds (this checkout's stepscope installed
into a scratch directory for it; `vllm_checkpoint_worker.py` does the timing). vLLM
0.33.0's `Scheduler` with 64 or 1,024 requests running (prompts of 64 tokens whose first
32 every request shares, prefix caching on, scripted outputs) in a pool of 10,000 or
100,000 blocks. Per state: the median engine-thread CPU of a step (25 steps) and of a
checkpoint's engine-thread part (5 of them: `VllmCheckpointer.at_iteration_start`, the
snapshot and its hand-over to the row builder); the amortised cost is one checkpoint
over N steps, at the default interval (goal ≤ 1 %) and at others. The conversion and
the rows, built off the engine thread, are shown for scale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import vllm_venv
from results import heading, write_section
from stepscope.tracer.vllm.attach.checkpoint_interval import DEFAULT_CHECKPOINT

HERE = Path(__file__).resolve().parent
GOAL_AMORTISED = 0.01
DEFAULT_EVERY = int(DEFAULT_CHECKPOINT.removesuffix("steps"))
INTERVALS = (100, 1000, DEFAULT_EVERY, 10_000)
PROMPT_LEN = 64
SHARED_PREFIX_LEN = 32
BLOCK_SIZE = 16


def state_case(num_requests: int, num_blocks: int) -> dict[str, Any]:
    """`num_requests` requests arriving at step 0 that all fit and none of which ends soon."""
    requests = [
        {
            "id": f"r{i}",
            "arrival_step": 0,
            "prompt_token_ids": [7 + t for t in range(SHARED_PREFIX_LEN)]
            + [(i * 7919 + t) % 30000 + 3 for t in range(PROMPT_LEN - SHARED_PREFIX_LEN)],
            "max_tokens": 100_000,
        }
        for i in range(num_requests)
    ]
    config = {
        "block_size": BLOCK_SIZE,
        "num_blocks": num_blocks,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": num_requests,
        "max_model_len": 4096,
        "enable_prefix_caching": True,
    }
    workload = {"config": config, "requests": requests, "max_steps": 100_000}
    return {
        "name": f"{num_requests} running, {num_blocks:,} blocks",
        "workload": workload,
        "num_requests": num_requests,
    }


def table(rows: list[dict[str, Any]]) -> str:
    header = " | ".join(f"every {n:,} steps" for n in INTERVALS)
    lines = [
        f"| state | step µs | checkpoint µs (engine thread) | conversion µs | rows µs | {header} |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(INTERVALS),
    ]
    for row in rows:
        costs = []
        for every in INTERVALS:
            share = row["checkpoint_us"] / (every * row["step_us"])
            mark = " (ok)" if every == DEFAULT_EVERY and share <= GOAL_AMORTISED else ""
            costs.append(f"{share:.3%}{mark}")
        lines.append(
            f"| {row['name']} | {row['step_us']:,.0f} | {row['checkpoint_us']:,.0f} | "
            f"{row['convert_us']:,.0f} | {row['rows_us']:,.0f} | {' | '.join(costs)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="the small state only")
    args = parser.parse_args()
    if not vllm_venv.available():
        sys.exit(f"no vLLM venv at {vllm_venv.VENV}: build it with .ci/vllm-venv")
    states = [(64, 10_000)] if args.quick else [(64, 10_000), (1024, 10_000), (1024, 100_000)]
    rows = vllm_venv.run_worker(
        "vllm_checkpoint_worker.py", [state_case(n, blocks) for n, blocks in states]
    )
    text = table(rows)
    print(text)
    if args.results:
        intro = (
            f"{heading('vllm_checkpoint_cost.py')}\n\n"
            "vLLM 0.33.0's `Scheduler`, prefix caching on, scripted outputs: the engine "
            "thread's CPU per step (`schedule()` + `update_from_output()`, median of 25) and "
            "per checkpoint (its snapshot and hand-over, median of 5), in the same state; "
            "the conversion and the rows are built off the engine thread. Amortised: one "
            f"checkpoint over N steps; the default is every {DEFAULT_EVERY:,} steps "
            f"(`{DEFAULT_CHECKPOINT}`), goal ≤ {GOAL_AMORTISED:.0%}.\n\n"
        )
        write_section(args.results, "vllm_checkpoint_cost", intro + text)


if __name__ == "__main__":
    main()
