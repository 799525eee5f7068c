"""Memory and time of a replay's inputs: a trace's requests and tapes, a workload file's.

    python benchmarks/replay_inputs.py [--quick] [--baseline SRC] [--results benchmarks/RESULTS.md]

A replay holds every request's prompt and tape for the whole run. Each load runs in
a process of its own, which reports the seconds it took, the Python memory it left
held (`tracemalloc`, in a second run of the same load: tracing slows it) and its RSS
peak (VmHWM) above where it started. Loads: `workload_from_trace` of the 1,000,000-
step chat trace of `tracer_overhead.py --generate-1m` (made once into
~/.cache/stepscope-bench; 8.8 M prompt tokens) and of `replay_speed.py`'s trace (256
requests decoding 10,000 steps: 2.56 M tape tokens), and `parse_workload` of that
trace's workload file. `--quick`: a 20,000-step chat trace instead of the million.
With `--baseline SRC`, the `stepscope` package found under SRC (an older commit laid
out as installed) loads the same inputs, in turns with this code; figures are the
median over `--repeats`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from compact_memory import CACHE
from recording_rss import status_mb
from results import heading, write_section

FIGURES = ("seconds", "held_mb", "peak_mb")


def child(kind: str, source: Path, *, traced: bool) -> None:
    """Load `source` in this process; print its figures as one JSON line."""
    from stepscope.engine.workload import parse_workload
    from stepscope.replay.inputs import workload_from_trace
    from stepscope.schema import open_trace

    text = source.read_text() if kind == "workload" else ""
    gc.collect()
    before = status_mb()["VmRSS"]
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    if kind == "workload":
        workload = parse_workload(text, source=str(source))
    else:
        with open_trace(source) as trace:
            workload = workload_from_trace(trace)
    seconds = time.perf_counter() - started
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] / 2**20 if traced else 0.0
    tokens = sum(len(s.prompt_token_ids) + len(s.output_token_ids) for s in workload.requests)
    peak = status_mb()["VmHWM"] - before
    print(json.dumps({"seconds": seconds, "held_mb": held, "peak_mb": peak, "tokens": tokens}))


def run_child(kind: str, source: Path, *, traced: bool, baseline: Path | None) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", kind, str(source)]
    command += ["--traced"] if traced else []
    env = dict(os.environ)
    if baseline is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(baseline), env.get("PYTHONPATH", "")])
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(kind: str, source: Path, repeats: int, baseline: Path | None) -> dict[str, dict]:
    """Each variant's median figures: untraced runs give the time and the peak, traced ones
    the Python memory held."""
    variants: dict[str, Path | None] = {"this code": None}
    if baseline is not None:
        variants["baseline"] = baseline
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for repeat in range(repeats):
        order = list(variants) if repeat % 2 == 0 else list(variants)[::-1]
        for name in order:
            plain = run_child(kind, source, traced=False, baseline=variants[name])
            traced = run_child(kind, source, traced=True, baseline=variants[name])
            runs[name].append({**plain, "held_mb": traced["held_mb"]})
    return {
        name: {key: statistics.median(run[key] for run in found) for key in (*FIGURES, "tokens")}
        for name, found in runs.items()
    }


def inputs(*, quick: bool, folder: Path) -> list[tuple[str, str, Path]]:
    """(label, kind, path) of each load."""
    from replay_speed import decoding_workload, decoding_workload_json
    from stepscope.engine import TapeModelRunner
    from stepscope.tracer.record_workload import record_workload
    from tracer_overhead import generate_million_step_trace

    if quick:
        chat = folder / "chat-20k.duckdb"
        generate_million_step_trace(chat, num_steps=20_000)
        chat_label = "chat trace, 20,000 steps"
    else:
        chat = CACHE / "chat-1m.duckdb"
        if not chat.exists():
            CACHE.mkdir(parents=True, exist_ok=True)
            generate_million_step_trace(chat)
        chat_label = "chat trace, 1,000,000 steps"
    steps = 1_000 if quick else 10_000
    workload = decoding_workload(256, steps)
    decode = folder / "decode.duckdb"
    tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
    record_workload(workload, TapeModelRunner(tapes), decode)
    workload_file = folder / "decode.json"
    workload_file.write_text(decoding_workload_json(256, steps))
    return [
        (chat_label, "trace", chat),
        (f"decode trace, 256 x {steps:,} steps", "trace", decode),
        (f"its workload file ({workload_file.stat().st_size / 1e6:.0f} MB of JSON)", "workload",
         workload_file),
    ]  # fmt: skip


def report(found: list[tuple[str, dict[str, dict]]], repeats: int) -> str:
    rows = [
        "| input | tokens | variant | seconds | Python memory held | RSS peak above start |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for label, figures in found:
        for name, f in figures.items():
            rows.append(
                f"| {label} | {f['tokens']:,.0f} | {name} | {f['seconds']:.2f} | "
                f"{f['held_mb']:.0f} MB | {f['peak_mb']:.0f} MB |"
            )
    method = (
        f"\n\nEach load in its own process; Python memory held = `tracemalloc` after the load "
        f"(a second, traced run); variants in turns, median of {repeats}."
    )
    return "\n".join(rows) + method


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help="internal")
    parser.add_argument("--traced", action="store_true", help="internal: trace Python memory")
    parser.add_argument("--quick", action="store_true", help="smaller inputs (a smoke test)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--baseline", type=Path, help="also load with the stepscope under SRC")
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), traced=args.traced)
        return
    with tempfile.TemporaryDirectory() as scratch:
        found = [
            (label, measure(kind, path, args.repeats, args.baseline))
            for label, kind, path in inputs(quick=args.quick, folder=Path(scratch))
        ]
    text = report(found, args.repeats)
    print(text)
    if args.results:
        write_section(args.results, "replay_inputs", f"{heading('replay_inputs.py')}\n\n{text}")


if __name__ == "__main__":
    main()
