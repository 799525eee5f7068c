"""What recording costs vLLM's engine thread, stock and recorded schedulers in lockstep, for
this checkout and others (a baseline), without a server.

    python benchmarks/vllm_engine_thread.py [--baseline CHECKOUT] [--repeats 5]
        [--segment 2000steps] [--results benchmarks/RESULTS.md]

Runs in the vLLM venv that `.ci/vllm-venv` builds, each checkout installed into a scratch
directory for it (`vllm_engine_thread_worker.py` does the timing). The case is
`vllm_serve_overhead.py`'s load (`workloads.serve_case`) stepped by vLLM 0.33.0's
`Scheduler` with scripted outputs, with no pause for the model and with a 1 ms one (the
builder thread runs then, and each step starts with cold caches, as in a server). Per
checkout and pause: the engine thread's CPU per step, stock and recorded, and recorded /
stock (median of the repeats, and their range), and the CPU per step of the recorder's own
threads (row builder, trace writer), which run off the engine thread but on the same cores.
Checkouts alternate, a repeat at a time.
With `--segment`, the recorded scheduler is a flight recorder (`STEPSCOPE_TRACE_SEGMENT`,
a recording folder) as `vllm_serve_overhead.py --segment` runs it. Goal: recorded / stock
≤ 1.05.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import vllm_venv
from paired import LEVEL, paired_ratio, verdict_at_most
from results import heading, write_section
from workloads import serve_case

GOAL = 1.05
PAUSES_MS = (0, 1)


def measure(checkouts: dict[str, Path], repeats: int, segment: str | None) -> list[dict[str, Any]]:
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for _ in range(repeats):
        for name, source in checkouts.items():
            for pause_ms in PAUSES_MS:
                [row] = vllm_venv.run_worker(
                    "vllm_engine_thread_worker.py",
                    [serve_case()],
                    "1",
                    str(pause_ms),
                    segment or "",
                    source=source,
                )
                runs.setdefault((name, pause_ms), []).append(row)
                print(f"{name} {pause_ms} ms: {row['ratio']:.3f}", file=sys.stderr)
    rows = []
    for (name, pause_ms), measured in runs.items():
        ratios = [row["ratio"] for row in measured]
        rows.append(
            {
                "checkout": name,
                "pause_ms": pause_ms,
                "stock_step_us": statistics.median(row["stock_step_us"] for row in measured),
                "recorded_step_us": statistics.median(row["recorded_step_us"] for row in measured),
                "threads_step_us": statistics.median(
                    row["recorder_threads_step_us"] for row in measured
                ),
                "ratio": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
                # Each run times both sides in lockstep: a pair.
                "paired": paired_ratio(
                    [row["stock_step_us"] for row in measured],
                    [row["recorded_step_us"] for row in measured],
                ),
            }
        )
    return rows


def table(rows: list[dict[str, Any]], repeats: int) -> str:
    lines = [
        "| checkout | model pause | stock µs/step | recorded µs/step | recorded / stock "
        f"(median of {repeats}) | range | {LEVEL:.0%} interval of the median: goal | "
        "recorder's threads µs/step |",
        "|---|---:|---:|---:|---:|---|---|---:|",
    ]
    for row in rows:
        ratio = row["paired"]
        lines.append(
            f"| {row['checkout']} | {row['pause_ms']} ms | {row['stock_step_us']:.0f} | "
            f"{row['recorded_step_us']:.0f} | {row['ratio']:.3f} | "
            f"{row['ratio_min']:.3f}–{row['ratio_max']:.3f} | {ratio.low:.3f}–{ratio.high:.3f}: "
            f"{verdict_at_most(ratio, GOAL)} | {row['threads_step_us']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another stepscope checkout to compare")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--segment", help="record as a flight recorder, segments this long (e.g. 2000steps)"
    )
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    args = parser.parse_args()
    if not vllm_venv.available():
        sys.exit(f"no vLLM venv at {vllm_venv.VENV}: build it with .ci/vllm-venv")
    checkouts = {"this checkout": vllm_venv.REPO}
    if args.baseline is not None:
        checkouts = {f"baseline ({args.baseline.name})": args.baseline.resolve(), **checkouts}
    text = table(measure(checkouts, args.repeats, args.segment), args.repeats)
    print(text)
    if args.results:
        mode = (
            "into one file"
            if args.segment is None
            else f"as a flight recorder (segments of {args.segment})"
        )
        intro = (
            f"{heading('vllm_engine_thread.py')}\n\n"
            "vLLM 0.33.0's `Scheduler`, stock and recorded "
            f"{mode}, in lockstep in one process "
            "(`vllm_serve_overhead.py`'s load, scripted outputs); engine-thread CPU of "
            f"`schedule()` + `update_from_output()` per step. Goal: ≤ {GOAL}.\n\n"
        )
        section = "vllm_engine_thread" if args.segment is None else "vllm_engine_thread_segments"
        write_section(args.results, section, intro + text)


if __name__ == "__main__":
    main()
