"""What recording costs: traced / untraced engine step time, ingest rate, bytes per row.

    python benchmarks/tracer_overhead.py [--results benchmarks/RESULTS.md] [--quick]
    python benchmarks/tracer_overhead.py --generate-1m PATH   # a 1,000,000-step trace

Engine: 1,024 requests decoding together (tape model). Untraced and traced runs
alternate in the same invocation; each figure is the median over the repeats.
Bytes per scheduled row are measured twice: on that uniform decode, and on chat
traffic (`chat_traffic.py`: prefix caching, chunked prefill, preemptions, over a
million rows), with each stored table's share of the file.
Ratios are taken in CPU time, which other work on the machine disturbs far less
than wall time, against the untraced step: the engine thread's cost (the traced step,
probe hooks and the recorder's effect on the caches included, plus `record_step`,
which turns each step into column buffers) and the end-to-end cost, which adds the
background DuckDB writer's CPU per step (all of its thread's CPU, the final
checkpoint included, over all recorded steps). The engine thread's wall-time ratio
is printed too: on a busy 2-core VM the writer's CPU lands on it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from chat_traffic import chat_size_figures, chat_size_report
from results import heading, write_section
from stepscope.engine import EngineLoop, TapeModelRunner, Workload
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.engine.workload import parse_workload
from stepscope.schema import open_trace
from stepscope.tracer.record_workload import record_workload, trace_meta
from stepscope.tracer.recorder import FLUSH_ROWS, TraceRecorder
from workloads import decode_case

GOAL_ENGINE_THREAD = 1.03
GOAL_END_TO_END = 1.05
RECORDER_WARMUP_STEPS = 2 * FLUSH_ROWS // 1024 + 1
"""Steps before measuring, both sides: the recorder's buffers get their memory in its first
two batches (one being written while the next fills) and reuse it from then on."""
GOAL_INGEST_ROWS_PER_S = 1_000_000
GOAL_BYTES_PER_ROW = 4.0


def decode_workload(
    num_requests: int, num_steps: int, recorder_warmup: int = 0
) -> tuple[Workload, int]:
    """The decode case and the step its measured steps start at (after `recorder_warmup`)."""
    case = decode_case(num_requests, num_steps + recorder_warmup)
    measure_from = case["measure_from"] + recorder_warmup
    case["workload"]["max_steps"] = measure_from + num_steps
    return parse_workload(json.dumps(case["workload"]), source="decode"), measure_from


def timed_run(workload: Workload, warmup: int, trace: Path | None) -> dict[str, float]:
    """Wall and engine-thread CPU time per step after warmup: engine step and recording."""
    recorder = TraceRecorder(trace, workload, trace_meta(workload)) if trace else None
    loop = EngineLoop(workload, TapeModelRunner({}), probe=recorder)
    steps = iter(loop.run())
    totals = dict.fromkeys(("engine_ms", "record_ms", "engine_cpu_ms", "record_cpu_ms"), 0.0)
    measured = num_steps = 0
    clock, cpu = time.perf_counter, time.thread_time
    while True:
        started, started_cpu = clock(), cpu()
        record = next(steps, None)
        if record is None:
            break
        stepped, stepped_cpu = clock(), cpu()
        if recorder is not None:
            recorder.record_step(record, loop.core.scheduler)
        done, done_cpu = clock(), cpu()
        num_steps += 1
        if record.step >= warmup:
            for name, value in (
                ("engine_ms", stepped - started),
                ("record_ms", done - stepped),
                ("engine_cpu_ms", stepped_cpu - started_cpu),
                ("record_cpu_ms", done_cpu - stepped_cpu),
            ):
                totals[name] += value
            measured += 1
    result = {name: total / measured * 1e3 for name, total in totals.items()}
    if recorder is not None:
        started = clock()
        recorder.close(complete=True)
        result["close_s"] = clock() - started
        result["rows"] = recorder.writer.rows_written
        result["write_cpu_s"] = recorder.writer.write_cpu_s
        result["writer_cpu_ms"] = recorder.writer.write_cpu_s / num_steps * 1e3
    return result


def scheduled_rows_and_bytes(trace: Path) -> tuple[int, float]:
    """Rows of `_scheduled`, and the whole file's bytes per such row."""
    with open_trace(trace) as opened:
        rows = int(opened.sql("SELECT count(*) FROM _scheduled").fetchall()[0][0])
    return rows, trace.stat().st_size / rows


def measure(num_steps: int, repeats: int, size_steps: int) -> dict[str, Any]:
    workload, warmup = decode_workload(1024, num_steps, RECORDER_WARMUP_STEPS)
    plain, traced = [], []
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(repeats):
            plain.append(timed_run(workload, warmup, None))
            traced.append(timed_run(workload, warmup, Path(folder) / f"trace{repeat}.duckdb"))
        long_workload, long_warmup = decode_workload(1024, size_steps)
        trace = Path(folder) / "long.duckdb"
        timed_run(long_workload, long_warmup, trace)
        size_rows, bytes_per_row = scheduled_rows_and_bytes(trace)
    untraced_cpu = median("engine_cpu_ms", plain)
    traced_cpu = median("engine_cpu_ms", traced)
    record_cpu = median("record_cpu_ms", traced)
    writer_cpu = median("writer_cpu_ms", traced)
    wall = statistics.median(r["engine_ms"] + r["record_ms"] for r in traced)
    engine_ratios = [
        (t["engine_cpu_ms"] + t["record_cpu_ms"]) / p["engine_cpu_ms"]
        for p, t in zip(plain, traced, strict=True)
    ]
    end_to_end_ratios = [
        (t["engine_cpu_ms"] + t["record_cpu_ms"] + t["writer_cpu_ms"]) / p["engine_cpu_ms"]
        for p, t in zip(plain, traced, strict=True)
    ]
    return {
        "steps": num_steps,
        "repeats": repeats,
        "untraced_ms": median("engine_ms", plain),
        "untraced_cpu_ms": untraced_cpu,
        "traced_engine_cpu_ms": traced_cpu,
        "record_cpu_ms": record_cpu,
        "writer_cpu_ms": writer_cpu,
        "engine_thread_ratio": statistics.median(engine_ratios),
        "engine_thread_range": (min(engine_ratios), max(engine_ratios)),
        "end_to_end_ratio": statistics.median(end_to_end_ratios),
        "end_to_end_range": (min(end_to_end_ratios), max(end_to_end_ratios)),
        "wall_ratio": wall / median("engine_ms", plain),
        "writer_ingest_rows_per_s": statistics.median(r["rows"] / r["write_cpu_s"] for r in traced),
        "bytes_per_row": bytes_per_row,
        "size_steps": size_steps,
        "size_rows": size_rows,
        "close_s": median("close_s", traced),
    }


def median(name: str, runs: list[dict[str, float]]) -> float:
    return statistics.median(run[name] for run in runs)


def report(figures: dict[str, Any]) -> str:
    def mark(*, ok: bool) -> str:
        return "ok" if ok else "over goal"

    def spread(bounds: tuple[float, float]) -> str:
        return f"runs {bounds[0]:.3f}–{bounds[1]:.3f}"

    engine_ok = figures["engine_thread_ratio"] <= GOAL_ENGINE_THREAD
    end_to_end_ok = figures["end_to_end_ratio"] <= GOAL_END_TO_END
    rows = [
        "| figure | value | goal |",
        "|---|---:|---|",
        f"| untraced engine step (1,024 decoding requests), CPU / wall | "
        f"{figures['untraced_cpu_ms']:.2f} / {figures['untraced_ms']:.2f} ms | |",
        f"| traced engine step (probe hooks), CPU | {figures['traced_engine_cpu_ms']:.2f} ms | |",
        f"| record_step per step, CPU | {figures['record_cpu_ms']:.3f} ms | |",
        f"| writer thread CPU per step | {figures['writer_cpu_ms']:.3f} ms | |",
        f"| ratio, engine thread (CPU: traced step + record_step) | "
        f"{figures['engine_thread_ratio']:.3f} ({spread(figures['engine_thread_range'])}) | "
        f"≤ {GOAL_ENGINE_THREAD} ({mark(ok=engine_ok)}) |",
        f"| ratio, end to end (CPU: traced step + record_step + writer thread) | "
        f"{figures['end_to_end_ratio']:.3f} ({spread(figures['end_to_end_range'])}) | "
        f"≤ {GOAL_END_TO_END} ({mark(ok=end_to_end_ok)}) |",
        f"| ratio, engine thread wall time (the writer competing for the cores) | "
        f"{figures['wall_ratio']:.3f} | |",
        f"| writer ingest (rows per second of writer CPU) | "
        f"{figures['writer_ingest_rows_per_s'] / 1e6:.2f} M | ≥ 1 M "
        f"({mark(ok=figures['writer_ingest_rows_per_s'] >= GOAL_INGEST_ROWS_PER_S)}) |",
        f"| bytes per scheduled (step, request) row in the file | "
        f"{figures['bytes_per_row']:.2f} | ≤ {GOAL_BYTES_PER_ROW} "
        f"({mark(ok=figures['bytes_per_row'] <= GOAL_BYTES_PER_ROW)}) |",
        f"| close (final checkpoint and compression) | {figures['close_s']:.2f} s | |",
    ]
    note = (
        f"{figures['steps']} measured steps after {RECORDER_WARMUP_STEPS} steps of recorder "
        f"warmup (both sides), median of {figures['repeats']} runs (the ratios: median of "
        f"each traced run over the untraced run before it); bytes per row "
        f"from one {figures['size_steps']}-step trace ({figures['size_rows']:,} rows)."
    )
    return "\n".join(rows) + "\n\n" + note


MILLION_STEP_TRAFFIC = """
description = "Chat traffic for the TUI benchmark: Poisson arrivals for a million steps."
seed = 11
num_requests = {num_requests}
max_steps = {num_steps}

[config]
block_size = 16
num_blocks = 80
max_num_batched_tokens = 256
max_num_seqs = 16
max_model_len = 512

[arrivals]
process = "poisson"
rate = 0.1

[prompt_len]
distribution = "lognormal"
mean = 60
sigma = 0.7
max = 300

[output_len]
distribution = "uniform"
min = 16
max = 96

[[prefix_groups]]
share = 0.6
prefix_len = 48
"""


def generate_million_step_trace(path: Path, num_steps: int = 1_000_000) -> None:
    """A real recorded run of `num_steps` steps of chat traffic that never runs dry.

    About six requests run at once, with prefix-cache hits and a preemption every few
    hundred steps when arrivals bunch up; arrivals go on past the last step, so the run
    is cut there.
    """
    text = MILLION_STEP_TRAFFIC.format(num_requests=num_steps // 10 + 1000, num_steps=num_steps)
    workload = parse_toml_workload(text, source="1m-step")
    summary = record_workload(workload, TapeModelRunner({}), path, flush_every_steps=4096)
    print(f"{path}: {summary.num_steps} steps, {path.stat().st_size / 1e6:.1f} MB")


def size_report(figures: dict[str, Any], chat: dict[str, Any]) -> str:
    return report(figures) + "\n\n" + chat_size_report(chat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    parser.add_argument("--generate-1m", type=Path, metavar="PATH", help="write a 1M-step trace")
    args = parser.parse_args()
    if args.generate_1m:
        generate_million_step_trace(args.generate_1m)
        return
    if args.quick:
        figures = measure(num_steps=60, repeats=2, size_steps=200)
        chat = chat_size_figures(num_requests=400)
    else:
        figures = measure(num_steps=300, repeats=11, size_steps=2000)
        chat = chat_size_figures(num_requests=5200)
    text = size_report(figures, chat)
    print(text)
    if args.results:
        write_section(args.results, "tracer_overhead", f"{heading('tracer_overhead.py')}\n\n{text}")


if __name__ == "__main__":
    main()
