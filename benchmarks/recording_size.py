"""Bytes per scheduled row of the chat traffic, recorded as one DuckDB file and as a folder of
Parquet segments, side by side, with each table's share and the token ids' floor.

    python benchmarks/recording_size.py [--requests 5200] [--results benchmarks/RESULTS.md]

The same workload is recorded once per variant; a folder's size counts every file in it
(its closed segments, the manifest). Segments open with a checkpoint, so each variant says
how often checkpoints are taken: one at each segment's start, or also every 1,000 steps
(`record`'s default). Goal: ≤ 4 bytes per scheduled row.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
from chat_traffic import CHAT_TRAFFIC, GOAL_BYTES_PER_ROW, VOCAB_SIZE, _shared_prefix_tokens
from results import heading, write_section
from stepscope.engine import TapeModelRunner, Workload
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.schema.recording_layout import folder_bytes
from stepscope.tracer.record_workload import record_workload
from stepscope.tracer.segments import SegmentSettings, parse_segment_every

VARIANTS = (
    ("one DuckDB file (checkpoints every 1,000 steps)", None, 1000),
    ("segments of 1,000 steps (a checkpoint at each start)", "1000steps", 0),
    ("segments of 5,000 steps (a checkpoint at each start)", "5000steps", 0),
    ("segments of 5,000 steps, checkpoints every 1,000 steps", "5000steps", 1000),
)


_STORED_AS = {"_request_rows": "_requests", "_prompt_prefixes": "_requests"}
"""A compacted file's tables that hold `_requests`."""


def measure(workload: Workload, folder: Path) -> list[dict[str, Any]]:
    """Record each variant into `folder` and measure it."""
    results = []
    for number, (name, segment, checkpoint_every) in enumerate(VARIANTS):
        path = folder / (f"v{number}" if segment else f"v{number}.duckdb")
        segments = None if segment is None else SegmentSettings(parse_segment_every(segment, "x"))
        record_workload(
            workload,
            TapeModelRunner.for_workload(workload),
            path,
            checkpoint_every=checkpoint_every,
            segments=segments,
        )
        size = folder_bytes(path) if path.is_dir() else path.stat().st_size
        results.append({"name": name, "bytes": size, "tables": _table_bytes(path)})
    return results


def _table_bytes(path: Path) -> dict[str, int]:
    """Each table's bytes: its files' in a folder, DuckDB's storage info in a file."""
    by_table: dict[str, int] = defaultdict(int)
    if path.is_dir():
        for file in path.rglob("*.parquet"):
            by_table["_" + file.stem] += file.stat().st_size
        return dict(by_table)
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute(
            "SELECT table_name, estimated_size FROM duckdb_tables() WHERE database_name = ?",
            [path.stem],
        ).fetchall()
        block = con.execute("SELECT block_size FROM pragma_database_size()").fetchall()[0][0]
        for table, _ in rows:
            blocks = con.execute(
                f"SELECT count(DISTINCT block_id) FROM pragma_storage_info('{table}') "
                "WHERE block_id >= 0"
            ).fetchall()[0][0]
            by_table[_STORED_AS.get(table, table)] += int(blocks) * int(block)
    return dict(by_table)


def counts(workload: Workload, trace: Path) -> dict[str, int]:
    with duckdb.connect(str(trace), read_only=True) as con:
        rows, sampled = con.execute(
            "SELECT count(*), count(sampled_token_id) FROM _scheduled"
        ).fetchall()[0]
        steps = con.execute("SELECT count(*) FROM _steps").fetchall()[0][0]
    prompt_tokens = sum(len(spec.prompt_token_ids) for spec in workload.requests)
    return {
        "rows": int(rows),
        "steps": int(steps),
        "sampled": int(sampled),
        "unique_prompt_tokens": prompt_tokens - _shared_prefix_tokens(workload),
    }


def report(results: list[dict[str, Any]], figures: dict[str, int], requests: int) -> str:
    rows = figures["rows"]
    bits = math.log2(VOCAB_SIZE)
    floor = (figures["unique_prompt_tokens"] + figures["sampled"]) * bits / 8 / rows
    tables = sorted(
        {t for r in results for t in r["tables"]}, key=lambda t: -results[-1]["tables"].get(t, 0)
    )
    lines = [
        "| recording | bytes per scheduled row | "
        + " | ".join(f"`{t}`" for t in tables[:6])
        + " |",
        "|---|---:|" + "---:|" * len(tables[:6]),
    ]
    for result in results:
        per_row = result["bytes"] / rows
        verdict = "ok" if per_row <= GOAL_BYTES_PER_ROW else "over goal"
        shares = " | ".join(f"{result['tables'].get(t, 0) / rows:.2f}" for t in tables[:6])
        lines.append(f"| {result['name']} | {per_row:.2f} ({verdict}) | {shares} |")
    note = (
        f"Chat traffic (`chat_traffic.py`): {requests:,} requests, {figures['steps']:,} steps, "
        f"{rows:,} scheduled rows. Floor: the token ids alone at {bits:.2f} bits each "
        f"({figures['unique_prompt_tokens']:,} prompt tokens past shared prefixes and "
        f"{figures['sampled']:,} sampled tokens): {floor:.2f} bytes per scheduled row. "
        f"Goal ≤ {GOAL_BYTES_PER_ROW}."
    )
    return "\n".join(lines) + "\n\n" + note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=5200)
    parser.add_argument("--results", type=Path)
    args = parser.parse_args()
    text = CHAT_TRAFFIC.format(num_requests=args.requests, vocab_size=VOCAB_SIZE)
    workload = parse_toml_workload(text, source="chat")
    with tempfile.TemporaryDirectory() as scratch:
        results = measure(workload, Path(scratch))
        figures = counts(workload, Path(scratch) / "v0.duckdb")
    section = heading("recording_size.py") + "\n\n" + report(results, figures, args.requests)
    print(section)
    if args.results is not None:
        write_section(args.results, "recording_size", section)


if __name__ == "__main__":
    main()
