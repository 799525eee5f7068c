"""Reading a window of a long trace against reading it whole, in turns in one run.

    python benchmarks/window_read.py [--requests N] [--copies N] [--window STEPS]
                                     [--rounds N] [--results RESULTS.md]

The chat traffic (`chat_traffic.py`) is recorded once into a recording folder of
1000-step segments, and the same run into a trace file that `tiled_trace.py` copies
`--copies` times end to end (a long day's trace; recording one that long takes hours).
Each figure is what a user waits on, opening the trace and running one query as
`stepscope sql` does: the trace read whole, and its last `--window` steps read through
`--from-step` (every table cut to them). The sides alternate, the order turning each
round; the table gives the medians. The goal is that a window costs what its steps do,
not what the trace holds: on the long trace, a window's time well under the whole's.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from chat_traffic import CHAT_TRAFFIC, VOCAB_SIZE
from results import heading, write_section
from stepscope.engine import TapeModelRunner
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.schema import open_trace
from stepscope.schema.step_window import WHOLE, StepWindow
from stepscope.tracer.record_workload import record_workload
from stepscope.tracer.segments import SegmentSettings, parse_retention, parse_segment_every
from tiled_trace import tile_trace

QUERIES = {
    "summary view": "SELECT * FROM summary",
    "requests view": "SELECT count(*), sum(num_preemptions) FROM requests",
    "why_waiting view": "SELECT reason, count(*) FROM why_waiting GROUP BY ALL",
}


def record(folder: Path, num_requests: int, copies: int) -> dict[str, Path]:
    """The chat traffic as a recording folder, and as a trace file tiled `copies` times."""
    text = CHAT_TRAFFIC.format(num_requests=num_requests, vocab_size=VOCAB_SIZE)
    workload = parse_toml_workload(text, source="chat")
    settings = SegmentSettings(
        parse_segment_every("1000steps", "bench"), parse_retention("100GB", "bench")
    )
    runner = TapeModelRunner.for_workload
    record_workload(workload, runner(workload), folder / "chat", segments=settings)
    record_workload(workload, runner(workload), folder / "chat.duckdb")
    tile_trace(folder / "chat.duckdb", folder / "long.duckdb", copies)
    return {
        "recording folder": folder / "chat",
        f"trace file, {copies} copies": folder / "long.duckdb",
    }


def seconds(path: Path, window: StepWindow, query: str) -> tuple[float, int]:
    """Open the recording (through `window`) and run `query`: seconds, and steps read."""
    started = time.perf_counter()
    with open_trace(path, window) as trace:
        trace.sql(query).fetchall()
        elapsed = time.perf_counter() - started
        return elapsed, trace.num_steps


def last_steps(path: Path, num_steps: int) -> tuple[int, StepWindow]:
    """The trace's steps, and the window of its last `num_steps`."""
    with open_trace(path) as trace:
        steps = trace.num_steps
    return steps, StepWindow(max(steps - num_steps, 0))


def measure(path: Path, window: StepWindow, rounds: int) -> dict[str, dict[str, float]]:
    """Median seconds of each query, whole and windowed, in alternating turns."""
    times: dict[str, dict[str, list[float]]] = {q: {"whole": [], "window": []} for q in QUERIES}
    for round_ in range(rounds):
        sides = [("whole", WHOLE), ("window", window)]
        for name, query in QUERIES.items():
            for side, read in sides if round_ % 2 == 0 else reversed(sides):
                times[name][side].append(seconds(path, read, query)[0])
    return {
        name: {side: statistics.median(values) for side, values in by_side.items()}
        for name, by_side in times.items()
    }


def report(rows: list[tuple[str, int, StepWindow, dict[str, dict[str, float]]]]) -> str:
    lines = [
        heading("window_read.py"),
        "",
        "Chat traffic, opened and queried as `stepscope sql` does: whole, and its last steps "
        "through `--from-step` (medians, alternating turns).",
        "",
        "| trace | steps | window | query | whole (ms) | window (ms) | window / whole |",
        "|---|---:|---|---|---:|---:|---:|",
    ]
    for trace, steps, window, medians in rows:
        shown = f"{window.from_step:,}..{steps - 1:,}"
        for name, sides in medians.items():
            whole, windowed = sides["whole"] * 1e3, sides["window"] * 1e3
            lines.append(
                f"| {trace} | {steps:,} | {shown} | {name} | {whole:.1f} | {windowed:.1f} "
                f"| {windowed / whole:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--window", type=int, default=500, help="the last STEPS read")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--results", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for trace, path in record(Path(folder), args.requests, args.copies).items():
            steps, window = last_steps(path, args.window)
            rows.append((trace, steps, window, measure(path, window, args.rounds)))
    text = report(rows)
    print(text)
    if args.results is not None:
        write_section(args.results, "window_read", text)


if __name__ == "__main__":
    main()
