"""What a piece of work costs right after the process has slept, against the same work run
again at once: how much the machine, not the code, adds to a benchmark's first call after
a pause.

    python benchmarks/cpu_after_idle.py [--repeats 7] [--results RESULTS.md]

Two pieces of work: a pure-Python loop over 200,000 integers, and pyarrow making a
list<int32> array of the same integers (what the recorder's builder does at each flush).
Each is timed (thread CPU) once after the process slept for each pause, then again at once;
the pauses alternate within each repeat. The recorder's threads wait between the steps
they are handed, and the lockstep benchmark's first flush follows a pause, so a machine that
runs slowly after a pause shows up in their figures.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from results import heading, write_section

PAUSES_S = (0.0, 0.2, 1.0, 3.0)
LISTS = [list(range(2000)) for _ in range(100)]
"""200,000 integers, in 100 lists."""


def python_loop() -> None:
    total = 0
    for values in LISTS:
        for value in values:
            total += value


def arrow_conversion() -> None:
    pa.array(LISTS, pa.list_(pa.int32()))


WORK: dict[str, Callable[[], None]] = {
    "pure-Python loop": python_loop,
    "pyarrow list<int32> array": arrow_conversion,
}


def cpu_ms(work: Callable[[], None]) -> float:
    started = time.thread_time_ns()
    work()
    return (time.thread_time_ns() - started) / 1e6


def measure(repeats: int) -> dict[tuple[str, float], tuple[list[float], list[float]]]:
    """For each piece of work and pause: the CPU ms of its first run after the pause, and of
    the run right after that."""
    runs: dict[tuple[str, float], tuple[list[float], list[float]]] = {
        (name, pause): ([], []) for name in WORK for pause in PAUSES_S
    }
    for name, work in WORK.items():
        work()  # imports and first allocations out of the way
        for _ in range(repeats):
            for pause in PAUSES_S:
                time.sleep(pause)
                first, again = runs[name, pause]
                first.append(cpu_ms(work))
                again.append(cpu_ms(work))
    return runs


def report(runs: dict[tuple[str, float], tuple[list[float], list[float]]], repeats: int) -> str:
    lines = [
        heading("cpu_after_idle.py"),
        "",
        "Thread CPU of one piece of work right after the process slept, and of the same work"
        f" run again at once; medians of {repeats}.",
        "",
        "| work | pause | first run after it (ms) | again (ms) | first / again | first, range |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for (name, pause), (first, again) in runs.items():
        ratio = statistics.median(first) / statistics.median(again)
        lines.append(
            f"| {name} | {pause:g} s | {statistics.median(first):.1f} "
            f"| {statistics.median(again):.1f} | {ratio:.1f} "
            f"| {min(first):.1f}–{max(first):.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--results", type=Path)
    args = parser.parse_args()
    text = report(measure(args.repeats), args.repeats)
    print(text)
    if args.results is not None:
        write_section(args.results, "cpu_after_idle", text)


if __name__ == "__main__":
    main()
