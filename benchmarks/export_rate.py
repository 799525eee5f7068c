"""Export rate: trace rows per second written as Perfetto and as Parquet, against DuckDB's COPY.

    python benchmarks/export_rate.py [--results benchmarks/RESULTS.md] [--quick]
        [--million PATH]   # a 1,000,000-step trace (made with tracer_overhead.py --generate-1m)

Traces: the chat traffic of `tracer_overhead.py --generate-1m` recorded for 20,000 steps
(the realistic case), and, with `--million`, the 1,000,000-step one. Per trace, three
sides alternate in one invocation and each figure is the median over the repeats:
DuckDB's own `COPY (SELECT * FROM table) TO ... (FORMAT parquet, COMPRESSION zstd)` of
every logical table (the baseline: DuckDB's native writer, no Python per row),
`stepscope export --parquet` and `stepscope export --perfetto`, each called in this
process. Rows are the trace's rows over every logical table, the same count for all
three sides, so the rates compare; the ratios are each export's time over the baseline's.
The Perfetto export builds protobuf packets in Python (six per step: the fields that
repeat merged in from cached templates, the rest set one by one) and, on a trace of
131,072 steps or more, in worker processes, whose CPU is not in "CPU s here"; on the 1M
trace it also runs in one process (`workers=1`), where that column is all its CPU.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
from results import heading, write_section
from stepscope.schema import logical_tables, open_trace
from stepscope.tracer.export import export_parquet, export_perfetto
from tracer_overhead import generate_million_step_trace


def trace_rows(trace: Path) -> int:
    """Rows over every logical table: the unit of the rates."""
    with open_trace(trace) as opened:
        return sum(
            int(opened.sql(f"SELECT count(*) FROM {table}").fetchall()[0][0])
            for table in logical_tables()
        )


def duckdb_copy(trace: Path, out: Path) -> None:
    """The baseline: DuckDB writes each logical table as zstd Parquet itself."""
    out.mkdir()
    with duckdb.connect(str(trace), read_only=True) as con:
        for table in logical_tables():
            target = out / f"{table.removeprefix('_')}.parquet"
            con.execute(
                f"COPY (SELECT * FROM {table}) TO '{target}' (FORMAT parquet, COMPRESSION zstd)"
            )


def timed(side: Callable[[Path], Any], out: Path) -> tuple[float, float, int]:
    """Wall seconds, this process's CPU seconds, and the bytes written."""
    started, cpu = time.perf_counter(), time.process_time()
    side(out)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if out.is_dir():
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        shutil.rmtree(out)
    else:
        size = out.stat().st_size
        out.unlink()
    return seconds, cpu, size


def measure(trace: Path, repeats: int, folder: Path, *, alone: bool) -> dict[str, Any]:
    sides: dict[str, Callable[[Path], Any]] = {
        "duckdb_copy": lambda out: duckdb_copy(trace, out),
        "parquet": lambda out: export_parquet(trace, out),
        "perfetto": lambda out: export_perfetto(trace, out),
    }
    if alone:
        sides["perfetto_alone"] = lambda out: export_perfetto(trace, out, workers=1)
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in sides}
    for repeat in range(repeats):
        for name, side in sides.items():
            runs[name].append(timed(side, folder / f"{name}-{repeat}.out"))
    with open_trace(trace) as opened:
        num_steps = opened.num_steps
    return {
        "trace": trace.name,
        "steps": num_steps,
        "rows": trace_rows(trace),
        "seconds": {n: statistics.median(r[0] for r in v) for n, v in runs.items()},
        "cpu": {n: statistics.median(r[1] for r in v) for n, v in runs.items()},
        "bytes": {n: v[0][2] for n, v in runs.items()},
    }


def note(figures: list[dict[str, Any]]) -> str:
    """What the table means on the machine it was taken on."""
    text = (
        "Wall time counts whatever else the machine runs (this project's VM: 2 cores, "
        "shared); the CPU column and the ratios are steadier. Perfetto writes six protobuf "
        "packets a step through the `perfetto` package's Python protos: the fields that "
        "repeat from step to step come from cached templates merged in a batch at a time, "
        "and only the times, counter values, step number and scheduled tokens are set per step."
    )
    for figure in figures:
        if "perfetto_alone" in figure["cpu"]:
            cpu, base = figure["cpu"]["perfetto_alone"], figure["cpu"]["duckdb_copy"]
            text += (
                f" On {figure['steps']:,} steps that is {cpu:.1f} s of CPU in one process "
                f"({cpu / base:.1f} times DuckDB COPY's CPU); worker processes share it out "
                "across the cores there are."
            )
    return text


SIDES = {
    "duckdb_copy": "DuckDB COPY to zstd Parquet (baseline)",
    "parquet": "`export --parquet`",
    "perfetto": "`export --perfetto`",
    "perfetto_alone": "`export --perfetto`, one process",
}


def report(figures: list[dict[str, Any]]) -> str:
    lines = [
        "| trace | steps | rows | side | MB | seconds | CPU s here | rows/s | time / COPY |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for figure in figures:
        base = figure["seconds"]["duckdb_copy"]
        for side, label in SIDES.items():
            if side not in figure["seconds"]:
                continue
            seconds = figure["seconds"][side]
            lines.append(
                f"| {figure['trace']} | {figure['steps']:,} | {figure['rows']:,} | {label} | "
                f"{figure['bytes'][side] / 1e6:.1f} | {seconds:.2f} | {figure['cpu'][side]:.2f} | "
                f"{figure['rows'] / seconds:,.0f} | {seconds / base:.2f} |"
            )
    return "\n".join([*lines, "", note(figures)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="2,000 steps, 2 repeats")
    parser.add_argument("--million", type=Path, help="also a 1,000,000-step trace (made if absent)")
    args = parser.parse_args()
    figures = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        num_steps = 2_000 if args.quick else 20_000
        realistic = folder / f"chat-{num_steps // 1000}k.duckdb"
        generate_million_step_trace(realistic, num_steps=num_steps)
        figures.append(measure(realistic, 2 if args.quick else 3, folder, alone=False))
        if args.million:
            if not args.million.exists():
                generate_million_step_trace(args.million)
            figures.append(measure(args.million, 1, folder, alone=True))
    text = report(figures)
    print(text)
    if args.results:
        write_section(args.results, "export_rate", f"{heading('export_rate.py')}\n\n{text}")


if __name__ == "__main__":
    main()
