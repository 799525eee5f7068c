"""Peak memory of a heavy query over a long recording: a reader's limit against DuckDB's own.

    python benchmarks/reader_memory.py [--requests N] [--results benchmarks/RESULTS.md]

The chat traffic (`chat_traffic.py`) with `--requests` requests (60,000: more arrive than
the KV cache serves, so the waiting queue grows to thousands, as on an overloaded server)
is recorded by `stepscope record --segment 1000steps` into a recording folder. Then
`stepscope sql DIR "SELECT reason, count(*) FROM why_waiting GROUP BY ALL"` runs in a
process of its own, once under the reader's default limit (a quarter of the memory, at
most 8 GiB; `schema/reader_memory.py`) and once with `STEPSCOPE_MEMORY_LIMIT` at 80 % of the
machine's memory, DuckDB's own default, which every reader had before. Each run's peak
(the child's ru_maxrss), wall clock and the most its spill folder held (sampled every
0.2 s) are printed. The goal: a query never takes more than the reader's limit, however
big the recording, and still answers (what does not fit is spilled).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from chat_traffic import CHAT_TRAFFIC, VOCAB_SIZE
from results import heading, write_section

QUERY = "SELECT reason, count(*) FROM why_waiting GROUP BY ALL"


def record(folder: Path, num_requests: int) -> Path:
    workload = folder / "chat.toml"
    workload.write_text(CHAT_TRAFFIC.format(num_requests=num_requests, vocab_size=VOCAB_SIZE))
    out = folder / "chat"
    command = [sys.executable, "-m", "stepscope", "record", str(workload), "--segment",
               "1000steps", "-o", str(out)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, cwd=folder)
    return out


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def run(recording: Path, limit: str | None) -> dict[str, float]:
    """One query in a child process: peak MB, seconds, most MB spilled, exit status."""
    spill_root = Path(tempfile.mkdtemp())
    env = {**os.environ, "TMPDIR": str(spill_root)}
    if limit is not None:
        env["STEPSCOPE_MEMORY_LIMIT"] = limit
    command = [sys.executable, "-m", "stepscope", "sql", str(recording), QUERY, "--csv"]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    spilled = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            spilled[0] = max(spilled[0], folder_bytes(spill_root))

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    done.set()
    sampler.join()
    seconds = time.perf_counter() - started
    shutil.rmtree(spill_root, ignore_errors=True)
    return {
        "peak_mb": usage.ru_maxrss / 1024,
        "seconds": seconds,
        "spilled_mb": spilled[0] / 1e6,
        "status": os.waitstatus_to_exitcode(status),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60000)
    parser.add_argument("--results", type=Path)
    args = parser.parse_args()
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    duckdb_default = f"{int(physical * 0.8)}B"
    with tempfile.TemporaryDirectory() as folder:
        recording = record(Path(folder), args.requests)
        steps = subprocess.run(
            [sys.executable, "-m", "stepscope", "sql", str(recording),
             "SELECT count(*) FROM steps", "--csv"],
            check=True, capture_output=True, text=True,
        ).stdout.splitlines()[1]  # fmt: skip
        on_disk = folder_bytes(recording) / 1e6
        runs = {
            "the reader's limit (default)": run(recording, None),
            "DuckDB's default (80 % of memory)": run(recording, duckdb_default),
        }
    lines = [
        heading("reader_memory.py"),
        "",
        f"`{QUERY}` over a recording of {int(steps):,} steps ({on_disk:.0f} MB on disk; "
        f"{args.requests:,} requests of chat traffic), each run a `stepscope sql` process of "
        f"its own, on a machine with {physical / 1e9:.1f} GB of memory.",
        "",
        "| reader memory | peak RSS (MB) | wall (s) | most spilled (MB) | exit |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, figures in runs.items():
        lines.append(
            f"| {name} | {figures['peak_mb']:,.0f} | {figures['seconds']:.1f} "
            f"| {figures['spilled_mb']:,.0f} | {figures['status']:.0f} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.results is not None:
        write_section(args.results, "reader_memory", text)


if __name__ == "__main__":
    main()
