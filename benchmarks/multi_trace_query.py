"""A query over 10 traces against the same query over one of them.

    python benchmarks/multi_trace_query.py [--results benchmarks/RESULTS.md] [--quick]

Ten traces of mixed traffic (the `mixed` workload with seeds 0-9: prompts of 64-2,048
tokens, shared prefixes, KV pressure and so preemptions) are recorded once. Each query
then runs, alternating, on trace 0 alone (`open_trace`, as `stepscope sql TRACE`), on
the ten trace files as one set and, where `stepscope export` is installed, on their
Parquet export as one set (`open_traces`, as `stepscope sql DIR`); the figures are
medians. Opening a set (attaching, defining every view per trace) is timed apart.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from results import heading, write_section
from stepscope.engine import TapeModelRunner
from stepscope.engine.workload import parse_workload
from stepscope.schema import open_trace
from stepscope.schema.trace_set import open_traces
from stepscope.tracer.record_workload import record_workload
from workloads import mixed_case

QUERIES = {
    "preemptions per request": (
        "SELECT request_id, count(*) AS n FROM preemptions GROUP BY request_id ORDER BY n DESC"
    ),
    "KV usage peak and mean": "SELECT max(usage), avg(usage) FROM kv_usage",
    "the run in one row": "SELECT * FROM summary",
    "why requests waited": "SELECT reason, count(*) FROM why_waiting GROUP BY reason",
    "step scan": "SELECT sum(num_scheduled_tokens), max(num_running_after) FROM steps",
}


def record_traces(folder: Path, num_traces: int, num_requests: int) -> list[Path]:
    """`num_traces` traces of mixed traffic, seeds 0..num_traces-1."""
    import json

    paths = []
    for seed in range(num_traces):
        case = mixed_case(num_requests, seed=seed)
        workload = parse_workload(json.dumps(case["workload"]), source=f"mixed-{seed}")
        path = folder / f"engine{seed}.duckdb"
        record_workload(workload, TapeModelRunner.for_workload(workload), path)
        paths.append(path)
    return paths


def parquet_export(paths: list[Path], out: Path) -> Path | None:
    """The traces exported as one Parquet dataset, or None where `stepscope export` is absent."""
    try:
        from stepscope.tracer.export.parquet import export_parquet  # type: ignore[import-not-found]
    except ImportError:
        return None
    for path in paths:
        export_parquet(path, out)
    return out


def seconds(run: Callable[[], Any]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def query_seconds(opened: Any, query: str) -> float:
    """Seconds to run `query` and fetch every row."""
    started = time.perf_counter()
    opened.sql(query).fetchall()
    return time.perf_counter() - started


def measure(sides: dict[str, Any], repeats: int) -> dict[str, dict[str, float]]:
    """Median seconds of each query on each side, the sides alternating."""
    times: dict[str, dict[str, list[float]]] = {q: {s: [] for s in sides} for q in QUERIES}
    for _ in range(repeats):
        for query_name, query in QUERIES.items():
            for side, opened in sides.items():
                times[query_name][side].append(query_seconds(opened, query))
    return {q: {s: statistics.median(t) for s, t in by.items()} for q, by in times.items()}


def measure_open(paths: list[Path], export: Path | None, repeats: int) -> dict[str, float]:
    opens: dict[str, list[float]] = {"one trace": [], "10 trace files": [], "10 in Parquet": []}
    for _ in range(repeats):
        opens["one trace"].append(seconds(lambda: open_trace(paths[0]).close()))
        opens["10 trace files"].append(seconds(lambda: open_traces(paths).close()))
        if export is not None:
            opens["10 in Parquet"].append(seconds(lambda: open_traces([export]).close()))
    return {side: statistics.median(t) for side, t in opens.items() if t}


def report(times: dict[str, dict[str, float]], opens: dict[str, float], rows: int) -> str:
    sides = list(next(iter(times.values())))
    lines = [
        "| query | " + " | ".join(f"{s} (ms)" for s in sides) + " | 10 files / one | per trace |",
        "|---|" + "---:|" * (len(sides) + 2),
    ]
    for query, by_side in times.items():
        one, ten = by_side["one trace"], by_side["10 trace files"]
        cells = " | ".join(f"{by_side[s] * 1e3:.1f}" for s in sides)
        lines.append(f"| {query} | {cells} | {ten / one:.1f} | {ten / one / 10:.2f} |")
    opened = ", ".join(f"{side} {value * 1e3:.0f} ms" for side, value in opens.items())
    lines += ["", f"Opening (checks, attaching, every view per trace): {opened}."]
    lines.append(f"Steps in the ten traces: {rows:,}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    args = parser.parse_args()
    num_requests, repeats = (40, 2) if args.quick else (400, 7)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        paths = record_traces(folder, 10, num_requests)
        export = parquet_export(paths, folder / "export")
        with open_trace(paths[0]) as one, open_traces(paths) as ten:
            sides: dict[str, Any] = {"one trace": one, "10 trace files": ten}
            rows = ten.sql("SELECT count(*) FROM _steps").fetchall()[0][0]
            if export is not None:
                sides["10 in Parquet"] = open_traces([export])
            times = measure(sides, repeats)
        opens = measure_open(paths, export, repeats)
    text = report(times, opens, rows)
    print(text)
    if args.results:
        note = (
            "\n\nMedians of the repeats, the sides alternating in one invocation; "
            "per trace = (10 files / one) / 10."
        )
        write_section(
            args.results, "multi_trace_query", f"{heading('multi_trace_query.py')}\n\n{text}{note}"
        )


if __name__ == "__main__":
    main()
