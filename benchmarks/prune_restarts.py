"""A server started again and again, recording into one directory: the directory's bytes with
`STEPSCOPE_TRACE_PRUNE`'s pruning at each start, beside the same starts without it.

    python benchmarks/prune_restarts.py [--starts 24] [--kill-every 3] [--prune 6MB]
        [--results benchmarks/RESULTS.md]

Each start is `stepscope record` of chat traffic (`chat_traffic.py`'s shape) into a new
folder of segments in the directory (`--segment 100steps --retain 2MB`: each recording is
bounded by its own retention), as a vLLM engine makes one per start. Every `--kill-every`th
start is killed with SIGKILL once its first segment has closed: a crash, which leaves the
open segment's parts and what the writer had still to delete. Each recording is made once
and copied (times kept) into two directories; before each start one of them is pruned past
`--prune` as an engine does with `STEPSCOPE_TRACE_PRUNE` (`prune_in_background`'s plan, run
here in the foreground and timed), the other never is. Printed per start: both
directories' bytes; then the largest, the bound, and how long a prune took.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from chat_traffic import CHAT_TRAFFIC, VOCAB_SIZE
from results import heading, write_section
from stepscope.schema.recording_layout import folder_bytes, scan
from stepscope.tracer.segments import parse_retention
from stepscope.tracer.segments.prune import carry_out, plan_prune

NUM_REQUESTS = 3000
"""Chat requests a start records (a run of several seconds: long enough to be killed)."""
SEGMENT = "100steps"
RETAIN = "2MB"


@dataclass(frozen=True)
class Start:
    number: int
    killed: bool
    recording_bytes: int
    pruned_bytes: int
    unpruned_bytes: int
    prune_s: float
    num_deleted: int


def record(workload: Path, folder: Path, *, kill: bool) -> None:
    """One start's recording into `folder`; with `kill`, SIGKILL once a segment has closed."""
    args = [sys.executable, "-m", "stepscope", "record", str(workload), "-o", str(folder)]
    args += ["--segment", SEGMENT, "--retain", RETAIN]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not kill:
        if process.wait() != 0:
            raise SystemExit(f"stepscope record into {folder} failed")
        return
    while process.poll() is None and not _has_closed_segment(folder):
        time.sleep(0.05)
    if process.poll() is not None:
        raise SystemExit(f"{folder}: the run ended before it could be killed; record more")
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


def _has_closed_segment(folder: Path) -> bool:
    return folder.is_dir() and any(segment.closed for segment in scan(folder))


def run(args: argparse.Namespace, scratch: Path) -> list[Start]:
    workload = scratch / "chat.toml"
    workload.write_text(CHAT_TRAFFIC.format(num_requests=NUM_REQUESTS, vocab_size=VOCAB_SIZE))
    made, pruned, unpruned = scratch / "made", scratch / "pruned", scratch / "unpruned"
    for folder in (made, pruned, unpruned):
        folder.mkdir()
    bound = parse_retention(args.prune, "--prune")
    starts = []
    for number in range(1, args.starts + 1):
        started = time.perf_counter()
        plan = plan_prune(pruned, bound, time.time())
        carry_out(plan)
        prune_s = time.perf_counter() - started
        name = f"vllm-{number:04d}"
        killed = number % args.kill_every == 0
        record(workload, made / name, kill=killed)
        for directory in (pruned, unpruned):
            shutil.copytree(made / name, directory / name)
        starts.append(
            Start(
                number,
                killed,
                folder_bytes(made / name),
                folder_bytes(pruned),
                folder_bytes(unpruned),
                prune_s,
                len(plan.doomed),
            )
        )
        shutil.rmtree(made / name)
        print(
            f"start {number}: pruned {folder_bytes(pruned) / 1e6:.2f} MB, "
            f"unpruned {folder_bytes(unpruned) / 1e6:.2f} MB",
            file=sys.stderr,
        )
    return starts


def report(starts: list[Start], args: argparse.Namespace) -> str:
    bound = parse_retention(args.prune, "--prune").max_bytes or 0
    largest = max(start.recording_bytes for start in starts)
    lines = [
        "| start | killed | its recording (MB) | pruned at each start (MB) | never pruned (MB) |",
        "|---:|---|---:|---:|---:|",
    ]
    lines += [
        f"| {s.number} | {'yes' if s.killed else ''} | {s.recording_bytes / 1e6:.2f} | "
        f"{s.pruned_bytes / 1e6:.2f} | {s.unpruned_bytes / 1e6:.2f} |"
        for s in starts
    ]
    after_first = [s for s in starts if s.num_deleted > 0]
    first = after_first[0].number if after_first else None
    held = [s.pruned_bytes for s in starts if first is not None and s.number >= first]
    prune_ms = sorted(s.prune_s * 1e3 for s in starts)
    lines += [
        "",
        "| figure | value |",
        "|---|---:|",
        f"| starts, of them killed | {len(starts)}, {sum(s.killed for s in starts)} |",
        f"| bound (`STEPSCOPE_TRACE_PRUNE`) | {bound / 1e6:.2f} MB |",
        f"| largest recording | {largest / 1e6:.2f} MB |",
        f"| first prune that deleted | start {first} |",
        f"| pruned directory from then on, min–max | "
        f"{min(held, default=0) / 1e6:.2f}–{max(held, default=0) / 1e6:.2f} MB |",
        f"| its ceiling: the bound, plus the start's own recording | "
        f"{(bound + largest) / 1e6:.2f} MB |",
        f"| never-pruned directory at the end / pruned | "
        f"{starts[-1].unpruned_bytes / max(starts[-1].pruned_bytes, 1):.1f}× |",
        f"| a prune's time, median / max | {prune_ms[len(prune_ms) // 2]:.1f} / "
        f"{prune_ms[-1]:.1f} ms |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=24)
    parser.add_argument("--kill-every", type=int, default=3)
    parser.add_argument("--prune", default="6MB", help="STEPSCOPE_TRACE_PRUNE's bound")
    parser.add_argument("--results", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        starts = run(args, Path(scratch))
    text = report(starts, args)
    print(text)
    if args.results is not None:
        intro = (
            f"{heading('prune_restarts.py')}\n\n"
            f"`stepscope record` of {NUM_REQUESTS} chat requests per start (`--segment "
            f"{SEGMENT} --retain {RETAIN}`), every {args.kill_every}th start killed with "
            "SIGKILL once a segment had closed; each recording copied into a directory pruned "
            f"past `{args.prune}` before every start and into one never pruned.\n\n"
        )
        write_section(args.results, "prune_restarts", intro + text)


if __name__ == "__main__":
    main()
