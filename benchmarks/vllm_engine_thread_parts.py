"""What each part of the vLLM recorder costs vLLM's engine thread: `vllm_engine_thread.py`'s
lockstep run with the whole recorder, then with each part switched off in turn
(`recorder_parts.py`), and with everything switched off (wrappers that pass straight through).

    python benchmarks/vllm_engine_thread_parts.py [--repeats 5] [--pause-ms 1]
        [--results benchmarks/RESULTS.md]

A diagnosis for the goal of `vllm_engine_thread.py` (recorded / stock ≤ 1.05), not a goal of
its own: per run, recorded / stock (median of the repeats, and their range) and the points it
is below the whole recorder's. In every run the builder thread builds no rows (see
`recorder_parts.py`). Parts overlap a little (the schedule facts read the tap's
decisions), so the points need not add up. Runs in the vLLM venv that `.ci/vllm-venv` builds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import vllm_venv
from recorder_parts import EVERYTHING, PARTS
from results import heading, write_section
from workloads import serve_case


def measure(repeats: int, pause_ms: int) -> list[dict[str, Any]]:
    """Alternating runs, a repeat at a time: the whole recorder, each part off, everything off."""
    runs: dict[str, list[float]] = {}
    for _ in range(repeats):
        for off in ("", *PARTS, EVERYTHING):
            [row] = vllm_venv.run_worker(
                "vllm_engine_thread_worker.py",
                [serve_case()],
                "1",
                str(pause_ms),
                "",
                off or "none",
            )
            runs.setdefault(off, []).append(row["ratio"])
            print(f"{off or 'whole recorder'}: {row['ratio']:.3f}", file=sys.stderr)
    whole = statistics.median(runs[""])
    return [
        {
            "off": off,
            "ratio": statistics.median(ratios),
            "range": (min(ratios), max(ratios)),
            "points": (whole - statistics.median(ratios)) * 100,
        }
        for off, ratios in runs.items()
    ]


def table(rows: list[dict[str, Any]], repeats: int) -> str:
    lines = [
        f"| switched off | recorded / stock (median of {repeats}) | range | points below whole |",
        "|---|---:|---|---:|",
    ]
    for row in rows:
        off = row["off"]
        name = "nothing (the whole recorder)" if not off else f"{off}: {PARTS.get(off, '')}"
        if off == EVERYTHING:
            name = "everything (wrappers passing straight through)"
        low, high = row["range"]
        lines.append(
            f"| {name} | {row['ratio']:.3f} | {low:.3f}–{high:.3f} | {row['points']:+.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pause-ms", type=int, default=1, help="the model's pause per step")
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    args = parser.parse_args()
    if not vllm_venv.available():
        sys.exit(f"no vLLM venv at {vllm_venv.VENV}: build it with .ci/vllm-venv")
    text = table(measure(args.repeats, args.pause_ms), args.repeats)
    print(text)
    if args.results:
        intro = (
            f"{heading('vllm_engine_thread_parts.py')}\n\n"
            "vLLM 0.33.0's `Scheduler`, stock and recorded into one file, in lockstep "
            f"(`vllm_engine_thread.py`'s run, model pause {args.pause_ms} ms), with parts of the "
            "recorder switched off in turn; engine-thread CPU of `schedule()` + "
            "`update_from_output()`, recorded / stock.\n\n"
        )
        write_section(args.results, "vllm_engine_thread_parts", intro + text)


if __name__ == "__main__":
    main()
