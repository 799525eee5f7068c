"""A long trace made of copies of a recorded one, end to end (steps, seqs and requests moved on).

    python benchmarks/tiled_trace.py SOURCE OUT [--copies 10]

Recording ten million steps takes hours; ten copies of a recorded million-step run,
each after the last, give a trace of the same shape in a minute. It is a valid trace
(every table, type and comment of the schema; `_meta.num_steps` the new count) for
reading — the TUI, queries, export — not for exact replay, since each copy starts
from the KV cache the previous one left.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import duckdb
from stepscope.schema.ddl import statements
from stepscope.schema.sql_files import strip_comments

_TILE_SQL = Path(__file__).with_name("sql") / "tile_trace.sql"

_SPANS = {
    "steps": "SELECT max(step) + 1 FROM src._steps",
    "seqs": "SELECT max(seq) + 1 FROM (SELECT seq FROM src._events UNION ALL "
    "SELECT seq FROM src._scheduled UNION ALL SELECT seq FROM src._allocations "
    "UNION ALL SELECT seq FROM src._preemptions)",
    "requests": "SELECT max(request_index) + 1 FROM src._requests",
    "span": "SELECT ceil(max(arrival_time)) + 1 FROM src._requests",
}
"""How far each copy moves its steps, seqs, request indexes and arrival times."""


def tile_trace(source: Path, out: Path, copies: int) -> None:
    """Write `copies` copies of the trace at `source` into a new trace at `out`."""
    partial = out.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    con = duckdb.connect(str(partial), config={"threads": 1})
    try:
        for statement in statements():
            con.execute(statement)
        con.execute(f"ATTACH '{source}' AS src (READ_ONLY)")
        for name, sql in _SPANS.items():
            con.execute(f"SET VARIABLE {name} = ({sql})")
        con.execute("INSERT INTO _config SELECT * FROM src._config")
        tiles = [s.strip() for s in strip_comments(_TILE_SQL.read_text()).split(";") if s.strip()]
        for copy in range(copies):
            for tile in tiles:
                con.execute(tile, [copy])
        _write_meta(con, copies)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    partial.rename(out)


def _write_meta(con: duckdb.DuckDBPyConnection, copies: int) -> None:
    ((steps,),) = con.execute("SELECT count(*) FROM _steps").fetchall()
    con.execute("INSERT INTO _meta SELECT * FROM src._meta")
    facts = {
        "num_steps": str(steps),
        "max_steps": str(steps),
        "workload": f"{copies}x-tiled",
        "description": f"{copies} copies, end to end, of a recorded {steps // copies:,}-step run.",
    }
    for key, value in facts.items():
        con.execute("INSERT OR REPLACE INTO _meta VALUES (?, ?)", [key, value])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a recorded trace")
    parser.add_argument("out", type=Path, help="the trace to write")
    parser.add_argument("--copies", type=int, default=10)
    args = parser.parse_args()
    started = time.perf_counter()
    tile_trace(args.source, args.out, args.copies)
    elapsed = time.perf_counter() - started
    print(f"{args.out}: {args.out.stat().st_size / 1e6:.1f} MB in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
