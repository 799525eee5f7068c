"""Exact replay speed against the untraced engine, and the time to diff two long traces.

    python benchmarks/replay_speed.py [--results benchmarks/RESULTS.md] [--quick] [--replay-only]
                                      [--baseline GIT_REF]

Replay: 256 requests decoding for 10,000 steps are recorded once; then the untraced
engine and the exact replay (which records the replay and compares it with the trace
step by step) run on the same workload in the same invocation, in rounds whose order
turns, from a collected heap; each round's steps per second are compared and the
median of the rounds' ratios is the figure (goal: replay at least 0.85 of the
engine's rate), by wall time and by the process's CPU time (all threads, DuckDB's
included: steadier on a shared machine). With --baseline, the replay package as at
that git ref (imported beside this one, the rest of stepscope shared) runs in each
round too, so the two replays are measured against the same engine runs.
Diff: two 100,000-step traces of 16 decoding requests (1.6 M scheduled rows each),
identical, so every step is compared; and the 1,000,000-step chat trace of
`tracer_overhead.py --generate-1m` (made once, kept in ~/.cache/stepscope-bench) against
a copy whose `_scheduled.seq` is shifted by one (the same decisions, but no step stored
alike, so every step is fingerprinted), a plain copy's time beside it.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from baseline_engine import import_part_at
from results import heading, write_section
from stepscope.engine import EngineLoop, TapeModelRunner, Workload
from stepscope.engine.workload import parse_workload
from stepscope.replay.diff import diff_traces
from stepscope.replay.exact import replay_exact
from stepscope.tracer.record_workload import record_workload
from tracer_overhead import generate_million_step_trace

GOAL_REPLAY_RATIO = 0.85
GOAL_DIFF_SECONDS = 1.0
GOAL_DIFF_1M_SECONDS = 2.0
CACHE = Path.home() / ".cache" / "stepscope-bench"
BASELINE_PACKAGE = "stepscope_baseline_replay"


def decoding_workload(num_requests: int, num_steps: int) -> Workload:
    """Requests that all decode from the first steps until `num_steps` (tape tokens, no EOS)."""
    text = decoding_workload_json(num_requests, num_steps)
    return parse_workload(text, source=f"decode-{num_requests}x{num_steps}")


def decoding_workload_json(num_requests: int, num_steps: int) -> str:
    """`decoding_workload` as a workload file holds it."""
    prompt_len, block_size = 32, 16
    requests = [
        {
            "id": f"r{i}",
            "prompt_token_ids": [(i * 7919 + t) % 30000 + 3 for t in range(prompt_len)],
            "output_token_ids": [(i + k) % 997 + 3 for k in range(num_steps)],
            "max_tokens": num_steps - 4,
        }
        for i in range(num_requests)
    ]
    blocks = num_requests * ((prompt_len + num_steps) // block_size + 2) + 1
    config = {
        "block_size": block_size,
        "num_blocks": blocks,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": max(num_requests, 8),
        "max_model_len": prompt_len + num_steps + 8,
    }
    return json.dumps({"config": config, "requests": requests, "max_steps": num_steps + 10})


def steps_per_second(run: Callable[[], int]) -> tuple[float, float]:
    """Steps per second of wall time and of the process's CPU time, from a collected heap."""
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    steps = run()
    return steps / (time.perf_counter() - started), steps / (time.process_time() - cpu)


def engine_run(workload: Workload) -> int:
    tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
    return sum(1 for _ in EngineLoop(workload, TapeModelRunner(tapes)).run())


def baseline_replay(ref: str, folder: Path) -> Callable[[Path], int]:
    """`replay_exact` of the replay package as at git `ref`, imported beside this one."""
    import_part_at(ref, "replay", BASELINE_PACKAGE, folder)
    exact = importlib.import_module(f"{BASELINE_PACKAGE}.exact")
    return lambda trace: int(exact.replay_exact(trace).num_compared_steps)


def measure_replay(
    num_requests: int, num_steps: int, repeats: int, folder: Path, baseline: str | None = None
) -> dict[str, Any]:
    """`repeats` rounds of an untraced engine run and exact replays of its trace (this
    code's and, with `baseline`, that ref's), the order turning every round, each round's
    ratios taken on their own: the machine's drift between rounds cancels, the order's
    bias turns."""
    workload = decoding_workload(num_requests, num_steps)
    trace = folder / "replay.duckdb"
    tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
    record_workload(workload, TapeModelRunner(tapes), trace)
    runs: dict[str, Callable[[], int]] = {
        "engine": lambda: engine_run(workload),
        "replay": lambda: replay_exact(trace).num_compared_steps,
    }
    if baseline is not None:
        old = baseline_replay(baseline, folder)
        runs["baseline"] = lambda: old(trace)
    names = list(runs)
    rounds = []
    for repeat in range(repeats):
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        if repeat // len(names) % 2:
            order.reverse()
        rounds.append({name: steps_per_second(runs[name]) for name in order})
    figures: dict[str, Any] = {
        "engine_steps_per_s": statistics.median(r["engine"][0] for r in rounds),
        "pairs": repeats,
        "steps": num_steps,
        "requests": num_requests,
        "baseline_ref": baseline,
    }
    for name in names[1:]:
        wall = [r[name][0] / r["engine"][0] for r in rounds]
        cpu = [r[name][1] / r["engine"][1] for r in rounds]
        figures[name] = {
            "steps_per_s": statistics.median(r[name][0] for r in rounds),
            "ratio": statistics.median(wall),
            "ratio_range": (min(wall), max(wall)),
            "cpu_ratio": statistics.median(cpu),
            "cpu_ratio_range": (min(cpu), max(cpu)),
        }
    return figures


def measure_diff(num_steps: int, repeats: int, folder: Path) -> dict[str, float]:
    workload = decoding_workload(16, num_steps)
    a, b = folder / "a.duckdb", folder / "b.duckdb"
    tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
    record_workload(workload, TapeModelRunner(tapes), a, flush_every_steps=4096)
    shutil.copy(a, b)
    return {"diff_s": timed_diff(a, b, repeats), "steps": num_steps}


def measure_diff_1m(repeats: int, folder: Path) -> dict[str, float]:
    """The diff of the cached 1,000,000-step chat trace with a copy whose `_scheduled.seq`
    is shifted by one: the same decisions, but no step stored alike, so every step is
    fingerprinted and compared (`diff_s`); and with a plain copy (`copy_diff_s`), whose
    steps the diff finds stored alike and does not fingerprint."""
    import duckdb  # here, not at the top: only this measure writes a trace by SQL

    a = CACHE / "chat-1m.duckdb"
    if not a.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        generate_million_step_trace(a)
    copy, shifted = folder / "chat-1m-copy.duckdb", folder / "chat-1m-shifted.duckdb"
    shutil.copy(a, copy)
    shutil.copy(a, shifted)
    with duckdb.connect(str(shifted)) as con:
        con.execute("UPDATE _scheduled SET seq = seq + 1")
    return {
        "diff_s": timed_diff(a, shifted, repeats),
        "copy_diff_s": timed_diff(a, copy, repeats),
        "steps": 1_000_000,
    }


def timed_diff(a: Path, b: Path, repeats: int) -> float:
    """Median seconds of `diff_traces(a, b)` (identical traces: every step compared)."""
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = diff_traces(a, b)
        seconds.append(time.perf_counter() - started)
        assert result.identical
    return statistics.median(seconds)


def spread(bounds: tuple[float, float]) -> str:
    return f"rounds {bounds[0]:.3f}-{bounds[1]:.3f}"


def report(
    replay: dict[str, Any], diff: dict[str, float] | None, diff_1m: dict[str, float] | None
) -> str:
    rows = [
        "| figure | value | goal |",
        "|---|---:|---|",
        f"| untraced engine, {int(replay['requests'])} decoding requests | "
        f"{replay['engine_steps_per_s']:.0f} steps/s | |",
    ]
    labels = {"replay": "this code"}
    if replay["baseline_ref"] is not None:
        labels["baseline"] = f"replay package at {replay['baseline_ref']}"
    for name, label in labels.items():
        rows += _replay_rows(replay[name], label, int(replay["steps"]), int(replay["pairs"]))
    if diff is not None:
        ok_diff = "ok" if diff["diff_s"] <= GOAL_DIFF_SECONDS else "over goal"
        rows.append(
            f"| diff of two {int(diff['steps']):,}-step traces | {diff['diff_s']:.2f} s | "
            f"≤ {GOAL_DIFF_SECONDS:g} s ({ok_diff}) |"
        )
    if diff_1m is not None:
        ok_1m = "ok" if diff_1m["diff_s"] <= GOAL_DIFF_1M_SECONDS else "over goal"
        rows.append(
            f"| diff of two 1,000,000-step chat traces | {diff_1m['diff_s']:.2f} s | "
            f"≤ {GOAL_DIFF_1M_SECONDS:g} s ({ok_1m}) |"
        )
    return "\n".join(rows)


def _replay_rows(figures: dict[str, Any], label: str, steps: int, rounds: int) -> list[str]:
    ok_wall = "ok" if figures["ratio"] >= GOAL_REPLAY_RATIO else "under goal"
    ok_cpu = "ok" if figures["cpu_ratio"] >= GOAL_REPLAY_RATIO else "under goal"
    return [
        f"| exact replay ({label}) | {figures['steps_per_s']:.0f} steps/s | |",
        f"| replay / engine rate ({label}, {steps:,} steps), wall, median of {rounds} rounds | "
        f"{figures['ratio']:.3f} ({spread(figures['ratio_range'])}) | "
        f"≥ {GOAL_REPLAY_RATIO} ({ok_wall}) |",
        f"| replay / engine rate ({label}), process CPU (all threads) | "
        f"{figures['cpu_ratio']:.3f} ({spread(figures['cpu_ratio_range'])}) | "
        f"≥ {GOAL_REPLAY_RATIO} ({ok_cpu}) |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    parser.add_argument("--replay-only", action="store_true", help="measure replay, not diff")
    parser.add_argument(
        "--baseline", metavar="GIT_REF", help="also replay with the replay package as at this ref"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        diff: dict[str, float] | None = None
        diff_1m: dict[str, float] | None = None
        if args.quick:
            replay = measure_replay(64, 500, repeats=3, folder=folder, baseline=args.baseline)
            if not args.replay_only:
                diff = measure_diff(5_000, repeats=1, folder=folder)
        else:
            replay = measure_replay(256, 10_000, repeats=6, folder=folder, baseline=args.baseline)
            if not args.replay_only:
                diff = measure_diff(100_000, repeats=3, folder=folder)
                diff_1m = measure_diff_1m(repeats=3, folder=folder)
    text = report(replay, diff, diff_1m)
    print(text)
    if args.results and not args.replay_only:
        note = (
            "\n\nReplay: the median of the rounds' ratios (engine and replays in turns, the order"
            " turning every round, the same invocation). Diff: the median of the repeats."
        )
        write_section(args.results, "replay_speed", f"{heading('replay_speed.py')}\n\n{text}{note}")


if __name__ == "__main__":
    main()
