"""Sweep rate with 1 and 2 jobs, and a sweep point's cost against a single what-if replay.

    python benchmarks/sweep_rate.py [--results benchmarks/RESULTS.md] [--quick] [--repeats N]

A chat-like synthetic workload (Poisson arrivals, lognormal prompts, a shared prefix, a KV
pool that preempts) is recorded once, about 10,000 steps. Each repeat then runs, in turn:
the sweep of a 4-point `num_blocks` grid with `--jobs 1`, the same sweep with `--jobs 2`,
and the 4 points as single what-if replays (`replay_whatif`, what `stepscope replay
--set` runs). Points per minute come from the sweeps; the overhead is the `--jobs 1`
sweep's time over the 4 single replays' time (goal: at most 1.1), in wall seconds and in
CPU seconds (both run in this process, so CPU time is the steadier figure on a loaded
machine). Medians of the repeats.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from results import heading, write_section
from stepscope.engine import TapeModelRunner
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.replay.sweep.grid import build_grid
from stepscope.replay.sweep.run import SweepPlan, run_sweep, trace_facts
from stepscope.replay.whatif import replay_whatif
from stepscope.schema import open_trace
from stepscope.tracer.record_workload import record_workload

GOAL_OVERHEAD = 1.1
GRID = {"num_blocks": [300, 350, 450, 600]}

WORKLOAD = """
description = "Chat traffic for the sweep benchmark"
seed = 11
num_requests = {num_requests}
max_steps = 40000
vocab_size = 32000

[config]
block_size = 16
num_blocks = 400
max_num_batched_tokens = 512
max_num_seqs = 32
max_model_len = 1024

[arrivals]
process = "poisson"
rate = 0.2

[prompt_len]
distribution = "lognormal"
mean = 200
sigma = 0.7
max = 700

[output_len]
distribution = "uniform"
min = 16
max = 200

[[prefix_groups]]
share = 0.5
prefix_len = 64
"""


def record_trace(num_requests: int, folder: Path) -> tuple[Path, int]:
    workload = parse_toml_workload(WORKLOAD.format(num_requests=num_requests), "sweep-bench")
    path = folder / "chat.duckdb"
    tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
    record_workload(workload, TapeModelRunner(tapes), path)
    with open_trace(path) as trace:
        return path, trace.num_steps


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds, and this process's CPU seconds (its workers' not counted)."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def sweep_seconds(trace: Path, jobs: int, folder: Path, run: int) -> tuple[float, float]:
    """One sweep of the grid, as `stepscope sweep` runs it (the trace read, then the points)."""

    def work() -> None:
        facts = trace_facts(trace)
        plan = SweepPlan(facts, build_grid(facts.config, GRID), None, frozenset(), jobs, None)
        run_sweep(plan, folder / f"sweep-{jobs}-{run}.duckdb", None)

    return timed(work)


def single_seconds(trace: Path, folder: Path, run: int) -> tuple[float, float]:
    """The grid's points as single what-if replays, one after another."""

    def work() -> None:
        for value in GRID["num_blocks"]:
            replay_whatif(trace, folder / f"alone-{value}-{run}.duckdb", {"num_blocks": value})

    return timed(work)


def measure(num_requests: int, repeats: int, folder: Path) -> dict[str, float]:
    trace, num_steps = record_trace(num_requests, folder)
    sides: dict[str, Callable[[int], tuple[float, float]]] = {
        "jobs_1": lambda run: sweep_seconds(trace, 1, folder, run),
        "jobs_2": lambda run: sweep_seconds(trace, 2, folder, run),
        "single": lambda run: single_seconds(trace, folder, run),
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    ratios, cpu_ratios = [], []
    for run in range(repeats):
        cpu = {}
        for name, side in sides.items():
            wall, cpu[name] = side(run)
            times[name].append(wall)
        ratios.append(times["jobs_1"][-1] / times["single"][-1])
        cpu_ratios.append(cpu["jobs_1"] / cpu["single"])
    points = len(GRID["num_blocks"])
    return {
        "steps": num_steps,
        "points": points,
        "per_min_1": 60 * points / statistics.median(times["jobs_1"]),
        "per_min_2": 60 * points / statistics.median(times["jobs_2"]),
        "single_s": statistics.median(times["single"]) / points,
        "overhead": statistics.median(ratios),
        "cpu_overhead": statistics.median(cpu_ratios),
    }


def report(figures: dict[str, float]) -> str:
    ok = "ok" if figures["overhead"] <= GOAL_OVERHEAD else "over goal"
    points, steps = int(figures["points"]), int(figures["steps"])
    return "\n".join([
        f"Trace: {steps:,} steps; grid: num_blocks = {GRID['num_blocks']} ({points} points).",
        "",
        "| figure | value | goal |",
        "|---|---:|---|",
        f"| sweep, --jobs 1 | {figures['per_min_1']:.1f} points/min | |",
        f"| sweep, --jobs 2 | {figures['per_min_2']:.1f} points/min | |",
        f"| single what-if replay, per point | {figures['single_s']:.2f} s | |",
        f"| sweep point / single what-if (--jobs 1), wall | {figures['overhead']:.3f} | "
        f"≤ {GOAL_OVERHEAD} ({ok}) |",
        f"| the same in CPU seconds (both in this process) | {figures['cpu_overhead']:.3f} | |",
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="a 2,000-step trace (a smoke test)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        num_requests = 400 if args.quick else 2000
        figures = measure(num_requests, 1 if args.quick else args.repeats, Path(scratch))
    text = report(figures)
    print(text)
    if args.results:
        note = (
            "\n\nMedians of the repeats; the two sweeps and the single replays alternate in "
            "the same invocation. Wall time on a shared machine (2 cores, other jobs running), "
            "so the 2-job rate is bounded by the cores left free."
        )
        write_section(args.results, "sweep_rate", f"{heading('sweep_rate.py')}\n\n{text}{note}")


if __name__ == "__main__":
    main()
