"""Memory and time of compacting a long trace at close, with DuckDB capped and uncapped.

    python benchmarks/compact_memory.py [--quick] [--baseline SRC] [--results benchmarks/RESULTS.md]

Each compaction (`tracer.compact._copy`, as a closing writer runs it, into a scratch
file) runs in a process of its own, which reports its RSS before it and its peak
(VmHWM) after it, and the seconds it took. Traces: the 10,000,000-step chat trace of
`tui_latency.py` (ten tiles of the 1,000,000-step one, its prompts stored whole, so
the shared-prompt pass runs; made once into ~/.cache/stepscope-bench if missing) and
the 1,000,000-step one (already compacted: tables copied only). `--quick`: a
20,000-step chat recording (left as written) instead. Variants, in turns, `--repeats`
each: this code (DuckDB capped at `compact.MEMORY_LIMIT`), this code with the cap
lifted, and with `--baseline SRC` the `stepscope` package found under SRC (an older
commit laid out as installed). Figures: the median over the repeats.
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
from pathlib import Path
from typing import Any

from results import heading, write_section

CACHE = Path.home() / ".cache" / "stepscope-bench"
UNCAPPED = "1TB"
"""The cap lifted: more than the machine has, so DuckDB keeps what it reads and writes."""


def child(trace: Path, out: Path, memory_limit: str | None) -> None:
    """Compact `trace` into `out` in this process; print its figures as one JSON line."""
    from stepscope.tracer import compact
    from stepscope.tracer.writer import _WRITER_CONFIG

    if memory_limit is not None:
        compact.MEMORY_LIMIT = memory_limit
    before = _status_mb("VmRSS")
    started = time.perf_counter()
    compact._copy(trace, out, _WRITER_CONFIG)
    seconds = time.perf_counter() - started
    figures = {"seconds": seconds, "before_mb": before, "peak_mb": _status_mb("VmHWM")}
    print(json.dumps({**figures, "out_mb": out.stat().st_size / 1e6}))


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def run_child(trace: Path, folder: Path, variant: str, baseline: Path | None) -> dict[str, Any]:
    out = folder / "compacted.duckdb"
    out.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--child", str(trace), str(out)]
    env = dict(os.environ)
    if variant == "uncapped":
        command += ["--memory-limit", UNCAPPED]
    if variant == "baseline" and baseline is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(baseline), env.get("PYTHONPATH", "")])
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    out.unlink(missing_ok=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(trace: Path, variants: list[str], repeats: int, baseline: Path | None) -> dict:
    runs: dict[str, list[dict[str, Any]]] = {variant: [] for variant in variants}
    with tempfile.TemporaryDirectory(dir=trace.parent) as scratch:
        for repeat in range(repeats):
            order = variants if repeat % 2 == 0 else variants[::-1]
            for variant in order:
                runs[variant].append(run_child(trace, Path(scratch), variant, baseline))
    return {
        variant: {
            key: statistics.median(run[key] for run in found)
            for key in ("seconds", "before_mb", "peak_mb", "out_mb")
        }
        for variant, found in runs.items()
    }


def traces(*, quick: bool, folder: Path) -> list[tuple[str, Path]]:
    from tiled_trace import tile_trace
    from tracer_overhead import generate_million_step_trace

    if quick:  # under compaction's size threshold: written as recorded, prompts whole
        path = folder / "chat-20k.duckdb"
        generate_million_step_trace(path, num_steps=20_000)
        return [("chat, 20,000 steps", path)]

    one_m, ten_m = CACHE / "chat-1m.duckdb", CACHE / "chat-10m.duckdb"
    if not one_m.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        generate_million_step_trace(one_m)
    if not ten_m.exists():
        tile_trace(one_m, ten_m, copies=10)
    return [("chat, 10,000,000 steps (prompts stored whole)", ten_m),
            ("chat, 1,000,000 steps (compacted: tables only)", one_m)]  # fmt: skip


def report(found: list[tuple[str, Path, dict]], variants: list[str], repeats: int) -> str:
    names = {
        "capped": "this code (capped)",
        "uncapped": f"this code, cap lifted ({UNCAPPED})",
        "baseline": "baseline (--baseline)",
    }
    rows = [
        "| trace | file | variant | peak above start | seconds | compacted |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for label, path, figures in found:
        for variant in variants:
            f = figures[variant]
            rows.append(
                f"| {label} | {path.stat().st_size / 1e6:.0f} MB | {names[variant]} | "
                f"{f['peak_mb'] - f['before_mb']:.0f} MB | {f['seconds']:.1f} | "
                f"{f['out_mb']:.0f} MB |"
            )
    method = (
        f"\n\nEach compaction in its own process (peak = VmHWM after it minus VmRSS before "
        f"it); variants in turns, median of {repeats}."
    )
    return "\n".join(rows) + method


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, type=Path, metavar=("TRACE", "OUT"), help="internal")
    parser.add_argument("--memory-limit", help="internal: the child's cap")
    parser.add_argument("--quick", action="store_true", help="a 20,000-step trace only")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--baseline", type=Path, help="also run the stepscope package under SRC")
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.memory_limit)
        return
    variants = ["capped", "uncapped"] + (["baseline"] if args.baseline else [])
    with tempfile.TemporaryDirectory() as scratch:
        found = [
            (label, path, measure(path, variants, args.repeats, args.baseline))
            for label, path in traces(quick=args.quick, folder=Path(scratch))
        ]
        text = report(found, variants, args.repeats)
    print(text)
    if args.results:
        write_section(args.results, "compact_memory", f"{heading('compact_memory.py')}\n\n{text}")


if __name__ == "__main__":
    main()
