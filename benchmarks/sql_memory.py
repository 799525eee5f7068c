"""Peak memory and time of `stepscope sql` printing a long result, against a baseline.

    python benchmarks/sql_memory.py [--rows N] [--baseline SRC] [--results benchmarks/RESULTS.md]

Each run is `python -m stepscope sql` in a process of its own over a small recorded trace
(conformance case 03), its stdout a pipe this script reads and drops (as `| wc` would); peak
memory is the child's `ru_maxrss` (`os.wait4`), time the wall clock from start to exit.
Linux counts what a forked child inherits in its peak, so this script stays small: the trace
is recorded in a process of its own. Queries: `--rows` rows of `(i, 'x' || i)` as `--csv`,
`--json` and the table, and as `--csv` read for two lines and closed (`| head -2`), also
sorted (`ORDER BY`, which DuckDB holds whole to sort); every column of the `steps` view
crossed with a range (about a million rows of 30 columns) as the table and as `--csv`.
With `--baseline SRC`, the same runs of the `stepscope` package under SRC (an older commit
laid out as installed, `make installed`), in turns with this code's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from results import heading, write_section

REPO = Path(__file__).resolve().parent.parent
ENV = {"COLUMNS": "160", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}


@dataclass(frozen=True)
class Case:
    label: str
    query: str
    options: tuple[str, ...]
    head_lines: int | None = None
    """Read this many lines, then close the pipe; None: read everything."""


@dataclass(frozen=True)
class Figures:
    peak_mb: float
    seconds: float
    cpu_seconds: float
    returncode: int


def cases(rows: int) -> list[Case]:
    long = f"SELECT range AS i, 'x' || range AS s FROM range({rows})"
    sorted_long = f"{long} ORDER BY i DESC"
    view = "SELECT r.range AS copy, s.* FROM steps s, range(80000) r"
    return [
        Case(f"{rows:,} rows --csv", long, ("--csv",)),
        Case(f"{rows:,} rows --json", long, ("--json",)),
        Case(f"{rows:,} rows, table", long, ()),
        Case(f"{rows:,} rows --csv \\| head -2", long, ("--csv",), head_lines=2),
        Case(f"{rows:,} rows sorted --csv \\| head -2", sorted_long, ("--csv",), head_lines=2),
        Case("steps x 80,000 (1,040,000 rows), table", view, ()),
        Case("steps x 80,000 (1,040,000 rows) --csv", view, ("--csv",)),
    ]


def run(trace: Path, case: Case, source: Path | None) -> Figures:
    """One run of the CLI (this code's, or the package under `source`)."""
    env = dict(ENV, PYTHONPATH=str(source)) if source is not None else dict(ENV)
    command = [sys.executable, "-m", "stepscope", "sql", str(trace), case.query, *case.options]
    started = time.perf_counter()
    process = subprocess.Popen(  # in the trace's folder: `-m` finds no package in the cwd
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=trace.parent
    )
    assert process.stdout is not None
    if case.head_lines is None:
        while process.stdout.read(1 << 20):
            pass
    else:
        for _ in range(case.head_lines):
            process.stdout.readline()
    process.stdout.close()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    cpu_seconds = usage.ru_utime + usage.ru_stime
    return Figures(usage.ru_maxrss / 1024, seconds, cpu_seconds, process.returncode)


def record_trace(path: Path) -> None:
    """Conformance case 03, recorded by a child: this process stays as small as it started."""
    script = (
        "import sys; from pathlib import Path; from traces import case, record; "
        "record(case('03'), Path(sys.argv[1]))"
    )
    env = dict(ENV, PYTHONPATH=str(REPO / "tests"))
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, env=env, cwd=REPO)


def report(found: list[tuple[Case, dict[str, Figures]]], variants: list[str]) -> str:
    names = {"this": "this code", "baseline": "baseline (--baseline)"}
    head = "| query | " + " | ".join(f"{names[v]}: peak, wall, CPU" for v in variants)
    rows = [head + (" | peak ratio |" if "baseline" in variants else " |")]
    rows.append("|---|" + "---:|" * (len(variants) + ("baseline" in variants)))
    for case, figures in found:
        cells = [
            f"{figures[v].peak_mb:,.0f} MB, {figures[v].seconds:.1f} s, "
            f"{figures[v].cpu_seconds:.1f} s"
            + ("" if figures[v].returncode == 0 else f" (exit {figures[v].returncode})")
            for v in variants
        ]
        if "baseline" in variants:
            cells.append(f"{figures['baseline'].peak_mb / figures['this'].peak_mb:.1f}x")
        rows.append(f"| {case.label} | " + " | ".join(cells) + " |")
    method = (
        "\n\nEach run its own process (peak: the child's ru_maxrss; CPU: its user and system "
        "time, which a loaded machine changes less than the wall clock), its output read "
        "through a pipe and dropped; this code and the baseline in turns, one run each."
    )
    return "\n".join(rows) + method


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--baseline", type=Path, help="also run the stepscope package under SRC")
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    args = parser.parse_args()
    variants = ["this"] + (["baseline"] if args.baseline else [])
    with tempfile.TemporaryDirectory() as scratch:
        trace = Path(scratch) / "run.duckdb"
        record_trace(trace)
        found = []
        for index, case in enumerate(cases(args.rows)):
            order = variants if index % 2 == 0 else variants[::-1]
            figures = {
                v: run(trace, case, args.baseline if v == "baseline" else None) for v in order
            }
            print(case.label, figures, flush=True)
            found.append((case, figures))
    text = report(found, variants)
    print(text)
    if args.results:
        write_section(args.results, "sql_memory", f"{heading('sql_memory.py')}\n\n{text}")


if __name__ == "__main__":
    main()
