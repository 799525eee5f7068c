"""What checkpoints cost: one checkpoint against one engine step, a recording with and
without them, and a replay of a trace's last steps from its checkpoint.

    python benchmarks/checkpoint_cost.py [--results benchmarks/RESULTS.md] [--quick]
                                         [--trace PATH] [--big-steps N] [--chat-requests N]

One checkpoint: an `EngineLoop` drives a synthetic workload (prompts of 64 tokens whose
first 32 every request shares, prefix caching on, outputs long enough that none ends)
until 64 or 1,024 requests run, under a pool of 10,000 or 100,000 KV blocks, then 48
steps more. There, after one untimed checkpoint (the process's first use of each
Arrow type is not a checkpoint's cost), at each of 5 successive steps the engine
thread's part of a checkpoint is timed (`take_checkpoint` and the hand-over to the
recorder, `PendingCheckpoint.of`: what `Checkpointer` does; the rows, `checkpoint_tables`,
are built on the writer's thread and timed apart); its baseline is the median wall time
of `schedule()` + `update_from_output()` of the 25 steps from there (the engine's own `EngineStep`
timings), in the same state. The amortised cost is one checkpoint over
`DEFAULT_CHECKPOINT_EVERY` such steps. Bytes: the 5 checkpoints written by the
recorder's `TraceWriter` into a fresh trace, the file's growth over an empty trace
written alike, per checkpoint.

Recording: the chat traffic of `chat_traffic.py` recorded whole with checkpoints at the
default interval and without, in turns (wall time of `record_workload`, its final
compaction included, and the file's size). The checkpoints' own `take_ns`, read back
from the trace, is printed as a share of the recording's time too (it does not drift
with the machine's load as the pair's difference does).

Replay: the 1,000,000-step trace of `tracer_overhead.py --generate-1m` (made at `--trace`
if absent; it carries the default checkpoints), its last 1,000 steps replayed from the
nearest checkpoint (`replay_exact(..., window=StepWindow(num_steps - 1000))`, median of
3) against the whole trace replayed from step 0 (once); and 1,000 steps that start one
step before the last checkpoint, so the replay runs 999 steps silently from the one
before first. Each windowed replay's time is split by timers around its parts (reading
the workload, building the model runner, reading the checkpoint, taking the runner up
there, running silently to the window, comparing with the trace); the rest is opening
the trace, replaying and recording the window's steps, and closing.

vLLM's scheduler is measured by `vllm_checkpoint_cost.py`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import stepscope.replay.exact as exact
from chat_traffic import CHAT_TRAFFIC, VOCAB_SIZE
from results import heading, write_section
from stepscope.engine import EngineLoop, TapeModelRunner, Workload
from stepscope.engine.checkpoint import take_checkpoint
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.engine.workload import parse_workload
from stepscope.replay.from_step import StepWindow
from stepscope.schema import open_trace
from stepscope.schema.storage_size import table_bytes
from stepscope.tracer.checkpoint_rows import PendingCheckpoint
from stepscope.tracer.checkpointer import DEFAULT_CHECKPOINT_EVERY
from stepscope.tracer.record_workload import record_workload
from stepscope.tracer.writer import TraceWriter
from tracer_overhead import generate_million_step_trace

GOAL_RECORDING_RATIO = 1.01
GOAL_REPLAY_RATIO = 0.01
PROMPT_LEN = 64
SHARED_PREFIX_LEN = 32
DECODE_STEPS = 48
"""Steps after every request runs, before measuring: each has output tokens and decode blocks."""
NUM_CHECKPOINTS = 5
NUM_STEPS = 25
LAST_STEPS = 1000


def state_workload(num_requests: int, num_blocks: int) -> Workload:
    """`num_requests` requests arriving at step 0 that all fit and none of which ends soon."""
    max_tokens = 1000
    requests = [
        {
            "id": f"r{i}",
            "prompt_token_ids": [7 + t for t in range(SHARED_PREFIX_LEN)]
            + [(i * 7919 + t) % 30000 + 3 for t in range(PROMPT_LEN - SHARED_PREFIX_LEN)],
            "output_token_ids": [(i + k) % 997 + 3 for k in range(max_tokens)],
            "max_tokens": max_tokens,
        }
        for i in range(num_requests)
    ]
    config = {
        "block_size": 16,
        "num_blocks": num_blocks,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": max(num_requests, 8),
        "max_model_len": 4096,
        "enable_prefix_caching": True,
    }
    text = json.dumps({"config": config, "requests": requests, "max_steps": 100_000})
    return parse_workload(text, source=f"state-{num_requests}x{num_blocks}")


def measure_state(num_requests: int, num_blocks: int, folder: Path) -> dict[str, Any]:
    """One checkpoint's engine-thread time and bytes, and one step's time, in the same state."""
    workload = state_workload(num_requests, num_blocks)
    loop = EngineLoop(workload, TapeModelRunner.for_workload(workload), keep_finishes=False)
    steps = loop.run()
    scheduler = loop.core.scheduler
    try:
        while len(scheduler.running) < num_requests:
            next(steps)
        for _ in range(DECODE_STEPS):
            next(steps)
        hashed = sum(
            block.block_hash is not None
            for block in scheduler.kv_cache_manager.block_pool.blocks  # type: ignore[attr-defined]
        )
        free = scheduler.get_num_free_blocks()
        PendingCheckpoint.of(
            take_checkpoint(loop.core, loop.num_steps, None), loop.request_index, 0
        ).tables()
        take_ns, rows_ns, step_ns, tables = [], [], [], []
        for index in range(NUM_STEPS):
            if index < NUM_CHECKPOINTS:
                step = loop.num_steps
                started = time.perf_counter_ns()
                checkpoint = take_checkpoint(loop.core, step, None)
                pending = PendingCheckpoint.of(checkpoint, loop.request_index, 0)
                taken = time.perf_counter_ns()
                tables.append(pending.tables())
                take_ns.append(taken - started)
                rows_ns.append(time.perf_counter_ns() - taken)
            record = next(steps)
            assert record.engine_step is not None
            step_ns.append(record.engine_step.schedule_ns + record.engine_step.update_ns)
        running = len(scheduler.running)
    finally:
        steps.close()
    checkpoint_s = statistics.median(take_ns) / 1e9
    step_s = statistics.median(step_ns) / 1e9
    return {
        "requests": num_requests,
        "running": running,
        "blocks": num_blocks,
        "hashed_blocks": hashed,
        "free_blocks": free,
        "checkpoint_s": checkpoint_s,
        "checkpoint_range_s": (min(take_ns) / 1e9, max(take_ns) / 1e9),
        "rows_s": statistics.median(rows_ns) / 1e9,
        "step_s": step_s,
        "bytes": checkpoint_bytes(tables, folder / f"state-{num_requests}-{num_blocks}"),
        "ratio": checkpoint_s / step_s,
        "amortised": checkpoint_s / (DEFAULT_CHECKPOINT_EVERY * step_s),
    }


def checkpoint_bytes(checkpoints: list[dict[str, pa.Table]], stem: Path) -> float:
    """Per checkpoint: a fresh trace's growth on disk with `checkpoints` written into it by
    the recorder's writer, over an empty trace written alike (both closed, not compacted)."""
    empty, full = stem.with_suffix(".empty.duckdb"), stem.with_suffix(".duckdb")
    TraceWriter(empty, {}, compact=False).close(complete=False)
    writer = TraceWriter(full, {}, compact=False)
    names = dict.fromkeys(name for tables in checkpoints for name in tables)
    writer.submit({name: pa.concat_tables([t[name] for t in checkpoints]) for name in names})
    writer.close(complete=False)
    return (full.stat().st_size - empty.stat().st_size) / len(checkpoints)


def chat_workload(num_requests: int) -> Workload:
    text = CHAT_TRAFFIC.format(num_requests=num_requests, vocab_size=VOCAB_SIZE)
    return parse_toml_workload(text, source="chat")


def timed_recording(workload: Workload, path: Path, every: int | None) -> dict[str, Any]:
    """Wall time of recording `workload` whole, the file's size, its checkpoints' take_ns."""
    started = time.perf_counter()
    summary = record_workload(
        workload, TapeModelRunner.for_workload(workload), path, checkpoint_every=every
    )
    seconds = time.perf_counter() - started
    con = duckdb.connect(str(path), read_only=True)
    try:
        ((count, take_ns),) = con.execute(
            "SELECT count(*), coalesce(sum(take_ns), 0) FROM _checkpoints"
        ).fetchall()
        sizes = table_bytes(con)
    finally:
        con.close()
    return {
        "seconds": seconds,
        "bytes": path.stat().st_size,
        "steps": summary.num_steps,
        "checkpoints": int(count),
        "take_s": int(take_ns) / 1e9,
        "checkpoint_table_bytes": sum(v for k, v in sizes.items() if k.startswith("_checkpoint")),
    }


def measure_recording(num_requests: int, pairs: int, folder: Path) -> dict[str, Any]:
    """Recordings with checkpoints at the default interval and without, in turns (the
    order turning every pair)."""
    workload = chat_workload(num_requests)
    runs: dict[str, list[dict[str, Any]]] = {"with": [], "without": []}
    for pair in range(pairs):
        order = ["without", "with"] if pair % 2 == 0 else ["with", "without"]
        for name in order:
            path = folder / f"chat-{name}-{pair}.duckdb"
            every = DEFAULT_CHECKPOINT_EVERY if name == "with" else 0
            runs[name].append(timed_recording(workload, path, every))
            path.unlink()
    ratios = [
        w["seconds"] / o["seconds"] for w, o in zip(runs["with"], runs["without"], strict=True)
    ]
    with_run, without_run = runs["with"][0], runs["without"][0]
    return {
        "requests": num_requests,
        "pairs": pairs,
        "steps": with_run["steps"],
        "checkpoints": with_run["checkpoints"],
        "with_s": statistics.median(r["seconds"] for r in runs["with"]),
        "without_s": statistics.median(r["seconds"] for r in runs["without"]),
        "time_ratio": statistics.median(ratios),
        "time_ratio_range": (min(ratios), max(ratios)),
        "with_bytes": with_run["bytes"],
        "without_bytes": without_run["bytes"],
        "checkpoint_table_bytes": with_run["checkpoint_table_bytes"],
        "take_s": statistics.median(r["take_s"] for r in runs["with"]),
        "take_share": statistics.median(r["take_s"] / r["seconds"] for r in runs["with"]),
    }


@contextmanager
def part_timers(parts: dict[str, tuple[str, ...]]) -> Iterator[dict[str, float]]:
    """Seconds spent in each of the replay's functions named in `parts` (a label: the
    functions, each `module.name` under `stepscope.replay`, patched where that module has
    it) while the block runs. None of them calls another."""
    spent = dict.fromkeys(parts, 0.0)
    patched = []

    def timed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[label] += time.perf_counter() - started

        return wrapper

    for label, names in parts.items():
        for dotted in names:
            module_name, name = dotted.split(".")
            module = importlib.import_module(f"stepscope.replay.{module_name}")
            function = getattr(module, name, None)
            if function is not None:
                patched.append((module, name, function))
                setattr(module, name, timed(label, function))
    try:
        yield spent
    finally:
        for module, name, function in patched:
            setattr(module, name, function)


REPLAY_PARTS = {
    "reading the workload from the trace (`workload_from_trace`)": (
        "exact.workload_from_trace",
        "from_step.workload_from_trace",
    ),
    "building the model runner (`replay_model_runner`)": (
        "exact.replay_model_runner",
        "from_step.replay_model_runner",
    ),
    "reading the checkpoint (`read_checkpoint`)": ("from_step.read_checkpoint",),
    "taking the runner up there (`resume_runner`)": ("from_step.resume_runner",),
    "running silently to the window (`run_silently`)": ("from_step.run_silently",),
    "comparing with the trace (`_compare`)": ("exact._compare",),
}


def timed_window(trace: Path, window: StepWindow, repeats: int) -> dict[str, Any]:
    """Median seconds of replaying `window`, and the parts of the fastest run."""
    seconds, parts = [], []
    result = None
    for _ in range(repeats):
        with part_timers(REPLAY_PARTS) as spent:
            started = time.perf_counter()
            result = exact.replay_exact(trace, window=window)
            seconds.append(time.perf_counter() - started)
        parts.append(spent)
        assert result.divergence is None, result.divergence
    assert result is not None
    fastest = min(range(repeats), key=seconds.__getitem__)
    return {
        "from_step": window.from_step,
        "checkpoint_step": result.checkpoint_step,
        "compared": result.num_compared_steps,
        "seconds": statistics.median(seconds),
        "range_s": (min(seconds), max(seconds)),
        "parts": parts[fastest],
        "fastest_s": seconds[fastest],
    }


def measure_replay(trace: Path, num_steps: int, repeats: int) -> dict[str, Any]:
    """The trace's last `LAST_STEPS` steps replayed from its checkpoint, against the whole;
    and a window of as many steps that starts just before a checkpoint (the most steps
    run silently first)."""
    if not trace.exists():
        trace.parent.mkdir(parents=True, exist_ok=True)
        generate_million_step_trace(trace, num_steps)
    with open_trace(trace) as opened:
        recorded_steps = opened.num_steps
        ((checkpoints, last_checkpoint),) = opened.sql(
            "SELECT count(*), max(step) FROM _checkpoints"
        ).fetchall()
    last = timed_window(trace, StepWindow(recorded_steps - LAST_STEPS), repeats)
    before = last_checkpoint - 1
    worst = timed_window(trace, StepWindow(before, before + LAST_STEPS - 1), repeats)
    started = time.perf_counter()
    whole = exact.replay_exact(trace)
    whole_s = time.perf_counter() - started
    assert whole.divergence is None, whole.divergence
    return {
        "trace": trace,
        "trace_bytes": trace.stat().st_size,
        "steps": recorded_steps,
        "trace_checkpoints": int(checkpoints),
        "last": last,
        "worst": worst,
        "whole_s": whole_s,
        "whole_compared": whole.num_compared_steps,
        "ratio": last["seconds"] / whole_s,
    }


def state_report(states: list[dict[str, Any]]) -> str:
    lines = [
        "| running requests × KV blocks | hashed / free blocks | one checkpoint (ms) | "
        "one engine step (ms) | checkpoint / step | amortised at every "
        f"{DEFAULT_CHECKPOINT_EVERY} | its rows, on the writer's thread (ms) | "
        "bytes per checkpoint |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in states:
        low, high = s["checkpoint_range_s"]
        lines.append(
            f"| {s['running']:,} × {s['blocks']:,} | {s['hashed_blocks']:,} / "
            f"{s['free_blocks']:,} | {s['checkpoint_s'] * 1e3:.2f} ({low * 1e3:.2f}–"
            f"{high * 1e3:.2f}) | {s['step_s'] * 1e3:.3f} | {s['ratio']:.1f} | "
            f"{100 * s['amortised']:.2f} % | {s['rows_s'] * 1e3:.2f} | "
            f"{s['bytes'] / 1e3:,.0f} kB |"
        )
    return "\n".join(lines)


def recording_report(r: dict[str, Any]) -> str:
    ok = "ok" if r["time_ratio"] <= GOAL_RECORDING_RATIO else "over goal"
    low, high = r["time_ratio_range"]
    return "\n".join(
        [
            f"| chat traffic, {r['requests']:,} requests, {r['steps']:,} steps | "
            f"with checkpoints (every {DEFAULT_CHECKPOINT_EVERY}) | without | with / without |",
            "|---|---:|---:|---:|",
            f"| recording time, wall (median of {r['pairs']}) | {r['with_s']:.2f} s | "
            f"{r['without_s']:.2f} s | {r['time_ratio']:.3f} (pairs {low:.3f}–{high:.3f}; "
            f"goal ≤ {GOAL_RECORDING_RATIO}: {ok}) |",
            f"| trace size | {r['with_bytes'] / 1e6:.2f} MB | {r['without_bytes'] / 1e6:.2f} MB "
            f"| {r['with_bytes'] / r['without_bytes']:.3f} |",
            f"| checkpoints taken; their `take_ns` summed, share of the recording | "
            f"{r['checkpoints']}; {r['take_s'] * 1e3:.1f} ms, {100 * r['take_share']:.2f} % | | |",
            f"| `_checkpoint*` tables in the file | "
            f"{r['checkpoint_table_bytes'] / 1e6:.2f} MB | | |",
        ]
    )


def replay_report(r: dict[str, Any]) -> str:
    ok = "ok" if r["ratio"] <= GOAL_REPLAY_RATIO else "over goal"
    last, worst = r["last"], r["worst"]
    lines = [
        f"| replay of a {r['steps']:,}-step chat trace | last {LAST_STEPS:,} steps | "
        f"{LAST_STEPS:,} steps from just before a checkpoint |",
        "|---|---:|---:|",
        f"| window (its checkpoint) | {last['from_step']:,}–{r['steps'] - 1:,} "
        f"({last['checkpoint_step']:,}) | "
        f"{worst['from_step']:,}–{worst['from_step'] + LAST_STEPS - 1:,} "
        f"({worst['checkpoint_step']:,}) |",
        f"| time, median of 3 (range) | {_seconds(last)} | {_seconds(worst)} |",
        f"| whole trace from step 0, once | {r['whole_s']:.1f} s | |",
        f"| window / whole | {r['ratio']:.4f} (goal ≤ {GOAL_REPLAY_RATIO}: {ok}) | "
        f"{worst['seconds'] / r['whole_s']:.4f} |",
    ]
    lines.append(
        f"| of the fastest run: | {last['fastest_s']:.2f} s | {worst['fastest_s']:.2f} s |"
    )
    for label in REPLAY_PARTS:
        lines.append(
            f"| … {label} | {last['parts'][label]:.2f} s | {worst['parts'][label]:.2f} s |"
        )
    rest = [run["fastest_s"] - sum(run["parts"].values()) for run in (last, worst)]
    lines.append(
        "| … the rest (opening the trace, the window's steps replayed and recorded, closing) "
        f"| {rest[0]:.2f} s | {rest[1]:.2f} s |"
    )
    note = (
        f"Trace: {r['trace']}, {r['trace_bytes'] / 1e6:.1f} MB, {r['trace_checkpoints']} "
        f"checkpoints; no replay diverged ({last['compared']:,}, {worst['compared']:,} and "
        f"{r['whole_compared']:,} steps compared)."
    )
    return "\n".join(lines) + "\n\n" + note


def _seconds(run: dict[str, Any]) -> str:
    low, high = run["range_s"]
    return f"{run['seconds']:.2f} s ({low:.2f}–{high:.2f})"


def report(
    states: list[dict[str, Any]], recording: dict[str, Any] | None, replay: dict[str, Any] | None
) -> str:
    parts = [state_report(states)]
    if recording is not None:
        parts.append(recording_report(recording))
    if replay is not None:
        parts.append(replay_report(replay))
    parts.append("vLLM's scheduler: see vllm_checkpoint_cost.py.")
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the tables into this RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="small runs (a smoke test)")
    parser.add_argument(
        "--trace", type=Path, default=Path("/tmp/bench/chat1m.duckdb"),
        help="the big chat trace (made if absent)",
    )  # fmt: skip
    parser.add_argument("--big-steps", type=int, default=1_000_000, help="its steps, if made")
    parser.add_argument("--chat-requests", type=int, default=15_600)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--skip", choices=("recording", "replay"), action="append", default=[])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        shapes = [(64, 10_000), (64, 100_000), (1024, 10_000), (1024, 100_000)]
        if args.quick:
            shapes = [(64, 10_000), (256, 10_000)]
        states = [measure_state(n, blocks, folder) for n, blocks in shapes]
        recording = None
        if "recording" not in args.skip:
            requests, pairs = (400, 1) if args.quick else (args.chat_requests, args.pairs)
            recording = measure_recording(requests, pairs, folder)
        replay = None
        if "replay" not in args.skip:
            trace = folder / "big.duckdb" if args.quick else args.trace
            steps = 5_000 if args.quick else args.big_steps
            replay = measure_replay(trace, steps, repeats=3)
    text = report(states, recording, replay)
    print(text)
    if args.results:
        write_section(args.results, "checkpoint_cost", f"{heading('checkpoint_cost.py')}\n\n{text}")


if __name__ == "__main__":
    main()
