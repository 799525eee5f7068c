"""The trace readers (one trace, a set, a diff's pair) against a baseline, in turns in one run.

    python benchmarks/trace_readers.py [--baseline SRC] [--rounds N] [--results RESULTS.md]

Ten traces of mixed traffic are recorded once. Each figure is measured in a fresh
process of its own, this code and, with `--baseline SRC`, the `stepscope` package
under SRC (a folder holding a `stepscope/` package: an older commit's checkout
linked there) in turns, the order turning each round; the table gives the medians
over the rounds. What is measured is what users wait on: opening a trace (as
`stepscope sql`, `info` and the TUI do), opening the ten as one set, the TUI's step
detail (each of 200 steps read once), a view over one trace, and the diff console's
query over both sides of a pair.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from results import heading, write_section

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

FIGURES = ("open one trace", "open a set of 10", "TUI step detail", "summary view", "pair console")
"""Each figure's name; a worker process measures one (`measure`)."""

_REPEATS = 20


def record_traces(folder: Path, num_traces: int) -> list[Path]:
    """`num_traces` traces of mixed traffic, seeds 0..num_traces-1 (this code records them)."""
    from multi_trace_query import record_traces as record

    return record(folder, num_traces, num_requests=200)


def median_ms(run: Callable[[], Any], repeats: int = _REPEATS) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def measure(figure: str, paths: list[Path]) -> float:
    """Milliseconds of one `figure`, with whichever `stepscope` this process imports."""
    from stepscope.schema import open_trace
    from stepscope.schema.trace_set import open_traces
    from stepscope.tui.console_session import ConsoleSession
    from stepscope.tui.trace_source import TraceSource

    if figure == "open one trace":
        return median_ms(lambda: open_trace(paths[0]).close())
    if figure == "open a set of 10":
        return median_ms(lambda: open_traces(paths).close(), repeats=5)
    if figure == "TUI step detail":
        source = TraceSource(paths[0])
        steps = iter(range(source.info.num_steps))
        ms = median_ms(lambda: source.step_detail(next(steps)), repeats=200)
        source.close()
        return ms
    if figure == "summary view":
        with open_trace(paths[0]) as trace:
            return median_ms(lambda: trace.sql("SELECT * FROM summary").fetchall())
    session = ConsoleSession(paths[0], paths[1])
    query = "SELECT (SELECT count(*) FROM steps), (SELECT count(*) FROM b.steps)"
    ms = median_ms(lambda: session.run(query))
    session.close()
    return ms


def run_worker(figure: str, paths: list[Path], source: Path | None) -> float:
    """`measure` in a fresh process, importing the package under `source` when given."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(source or ""), str(HERE)])))
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", figure, *map(str, paths)]
    done = subprocess.run(command, env=env, cwd=paths[0].parent, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"worker {figure!r} failed:\n{done.stderr}")
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def report(found: dict[str, dict[str, list[float]]], variants: list[str]) -> str:
    has_baseline = "baseline" in variants
    head = "| figure | this code (ms) |" + (
        " baseline (ms) | this / baseline |" if has_baseline else ""
    )
    rows = [head, "|---|---:|" + ("---:|---:|" if has_baseline else "")]
    for figure, by_variant in found.items():
        this = statistics.median(by_variant["this"])
        cells = [figure, f"{this:.2f}"]
        if has_baseline:
            base = statistics.median(by_variant["baseline"])
            cells += [f"{base:.2f}", f"{this / base:.2f}"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="also run the stepscope package under SRC")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every figure (3)")
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(measure(args.worker, args.paths)))
        return
    variants = ["this"] + (["baseline"] if args.baseline else [])
    with tempfile.TemporaryDirectory(prefix="stepscope-readers-") as folder:
        paths = record_traces(Path(folder), 10)
        found = {figure: {v: [] for v in variants} for figure in FIGURES}
        for round_ in range(args.rounds):
            order = variants if round_ % 2 == 0 else variants[::-1]
            for figure in FIGURES:
                for variant in order:
                    source = args.baseline if variant == "baseline" else None
                    found[figure][variant].append(run_worker(figure, paths, source))
    table = report(found, variants)
    text = (
        heading("trace_readers.py")
        + "\n\n"
        + table
        + f"\n\nMedians of {args.rounds} rounds, each figure a fresh process; this code and the"
        " baseline in turns, the order turning each round.\n"
    )
    print(text)
    if args.results is not None:
        write_section(args.results, "trace_readers", text)


if __name__ == "__main__":
    main()
