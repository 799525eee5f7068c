"""`stepscope info` with and without `--check` on a 1,000,000-step trace: what reading every
block costs.

    python benchmarks/info_check.py --trace PATH [--results RESULTS.md]

PATH is a trace from `tracer_overhead.py --generate-1m PATH` (made there when it does not
exist; that takes a while). Two measurements, the two sides alternating in one
invocation:

- in process: the `info` command itself (open, the summary view, meta, config, the
  report printed to a buffer), without and with `--check` (`Trace.read_all`: every
  column of every table read, so DuckDB checks each block's checksum); wall and process
  CPU, median of 7;
- whole process: `python -m stepscope info [--check] PATH`, as a user runs it (imports
  included), wall, median of 3.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from results import heading, write_section
from stepscope.schema import open_trace

from stepscope.commands.info import info

IN_PROCESS_REPEATS = 7
PROCESS_REPEATS = 3


def in_process(path: Path, *, check: bool) -> tuple[float, float]:
    """(wall s, process CPU s) of one `info` run in this process."""
    wall, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        info(path, check=check)
    return time.perf_counter() - wall, time.process_time() - cpu


def whole_process(path: Path, *, check: bool) -> float:
    """Wall seconds of `python -m stepscope info [--check] PATH`."""
    command = [
        sys.executable,
        "-m",
        "stepscope",
        "info",
        *(["--check"] if check else []),
        str(path),
    ]
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def measure(path: Path) -> dict[str, dict[str, float]]:
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(IN_PROCESS_REPEATS):
        for check in (False, True):
            runs[check].append(in_process(path, check=check))
    processes: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(PROCESS_REPEATS):
        for check in (False, True):
            processes[check].append(whole_process(path, check=check))
    return {
        "--check" if check else "plain": {
            "wall": statistics.median(w for w, _ in runs[check]),
            "cpu": statistics.median(c for _, c in runs[check]),
            "process": statistics.median(processes[check]),
        }
        for check in (False, True)
    }


def report(path: Path, figures: dict[str, dict[str, float]]) -> str:
    plain, checked = figures["plain"], figures["--check"]
    rows = [
        ("in process, wall (s)", "wall"),
        ("in process, CPU (s)", "cpu"),
        ("whole process, wall (s)", "process"),
    ]
    lines = [
        heading("info_check.py"),
        "",
        f"Trace: {path.name}, {_num_steps(path):,} steps, {path.stat().st_size / 1e6:.1f} MB.",
        "",
        "| | `info` | `info --check` | ratio |",
        "|---|---:|---:|---:|",
    ]
    for label, key in rows:
        lines.append(
            f"| {label} | {plain[key]:.3f} | {checked[key]:.3f} | {checked[key] / plain[key]:.2f} |"
        )
    load = os.getloadavg()[0]
    lines += [
        "",
        f"In process: median of {IN_PROCESS_REPEATS}, whole process: median of "
        f"{PROCESS_REPEATS}, the two sides alternating; load average {load:.1f} at the end. "
        "`--check` reads the whole file, so its cost grows with the file; `info` checks "
        "blocks only when asked and says so.",
    ]
    return "\n".join(lines)


def _num_steps(path: Path) -> int:
    with open_trace(path) as trace:
        return trace.num_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, required=True, help="a 1,000,000-step trace")
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    args = parser.parse_args()
    if not args.trace.exists():
        from tracer_overhead import generate_million_step_trace

        generate_million_step_trace(args.trace)
    text = report(args.trace, measure(args.trace))
    print(text)
    if args.results is not None:
        write_section(args.results, "info_check", text)


if __name__ == "__main__":
    main()
