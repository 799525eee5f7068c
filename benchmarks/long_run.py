"""Time and memory of `stepscope run` (table), `run --jsonl` and `record` over one long run.

    python benchmarks/long_run.py [--requests N] [--quick] [--results benchmarks/RESULTS.md]
    python benchmarks/long_run.py --recording [--quick] [--results benchmarks/RESULTS.md]

Workload: N requests (default 10,000; `--quick` 1,000) of 64 prompt tokens and 600
output tokens, one arriving every 3 steps, max_num_seqs 256, prefix caching on, tape
model: about 3 N + 600 steps with some 200 requests running. The three commands run
one after another in this invocation, each as its own process with its output going to
a file; a sampler reads the process's VmRSS every 0.1 s, and the figures at 10 %, 50 %
and 100 % are the samples nearest to that fraction of the process's wall time (progress
by elapsed time: the engine's steps cost about the same all run long). Max RSS is the
kernel's peak for the process (wait4's ru_maxrss), not a sample.

`--recording` measures recording alone on two more runs: 1,000,000 steps of chat
traffic (the TUI benchmark's trace, about six requests running) and 10,000
requests running at once (64 + 300 tokens each, all arriving at step 0). Each is
recorded in its own process that reads its own RSS by steps recorded
(`recording_rss.py`), and run again there with no recorder, so the table shows
what the engine itself holds beside what the recorder adds. `--baseline SRC`
records each run once more first, importing the `stepscope` package found under
SRC (e.g. an older commit's `stepscope/` with `engine/`, `tracer/`, ... copied into it).
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
from dataclasses import dataclass
from pathlib import Path

from recording_rss import status_mb
from results import heading, write_section
from tracer_overhead import MILLION_STEP_TRAFFIC

GOAL_TABLE_RATIO = 1.2
GOAL_RSS_MB = 300
SAMPLE_EVERY_S = 0.1
FRACTIONS = (0.1, 0.5, 1.0)

STREAM_WORKLOAD = """
description = "A steady stream: one request every 3 steps, fixed prompt and output lengths."
seed = {seed}
num_requests = {num_requests}
max_steps = {max_steps}

[config]
block_size = 16
num_blocks = {num_blocks}
max_num_batched_tokens = {max_num_batched_tokens}
max_num_seqs = {max_num_seqs}
max_model_len = {max_model_len}
enable_prefix_caching = true

[arrivals]
process = "constant"
interval = 3

[prompt_len]
distribution = "fixed"
value = {prompt_len}

[output_len]
distribution = "fixed"
value = {output_len}
"""


STREAM_DEFAULTS = {
    "prompt_len": 64,
    "output_len": 600,
    "max_num_seqs": 256,
    "num_blocks": 12000,
    "max_num_batched_tokens": 8192,
    "max_model_len": 1024,
    "seed": 5,
}
"""The benchmark's stream; a test passes smaller values for any of them."""


def stream_workload(num_requests: int, **overrides: int) -> str:
    """The TOML of a steady stream: requests come and go, about `output_len / 3` at once."""
    unknown = overrides.keys() - STREAM_DEFAULTS.keys()
    assert not unknown, f"not a stream setting: {sorted(unknown)}"
    values = {**STREAM_DEFAULTS, **overrides}
    return STREAM_WORKLOAD.format(
        num_requests=num_requests, max_steps=3 * num_requests + 2000, **values
    )


CONCURRENT_WORKLOAD = """
description = "10,000 requests running at once: 64 prompt tokens, 300 outputs each."
seed = 9
num_requests = {num_requests}
max_steps = 2000

[config]
block_size = 16
num_blocks = {num_blocks}
max_num_batched_tokens = 65536
max_num_seqs = {num_requests}
max_model_len = 1024

[arrivals]
process = "burst"
size = {num_requests}
every = 100000

[prompt_len]
distribution = "fixed"
value = 64

[output_len]
distribution = "fixed"
value = 300
"""


@dataclass
class Measured:
    name: str
    wall_s: float
    samples: list[tuple[float, float]]  # (elapsed s, RSS MB)
    max_rss_mb: float
    output_bytes: int

    def at(self, fraction: float) -> tuple[float, float]:
        """The sample nearest to `fraction` of the wall time."""
        target = fraction * self.wall_s
        return min(self.samples, key=lambda sample: abs(sample[0] - target))


def rss_mb(pid: int) -> float | None:
    try:
        return status_mb(pid).get("VmRSS")
    except OSError:  # it has exited
        return None


def measure(name: str, args: list[str], stdout: Path, output: Path) -> Measured:
    """Run `stepscope ARGS`, sampling its RSS until it exits."""
    command = [sys.executable, "-m", "stepscope", *args]
    errors = stdout.with_suffix(".stderr")
    with stdout.open("wb") as sink, errors.open("wb") as error_sink:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=sink, stderr=error_sink)
        samples: list[tuple[float, float]] = []
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            elapsed = time.perf_counter() - started
            if pid:
                break
            rss = rss_mb(process.pid)
            if rss is not None:
                samples.append((elapsed, rss))
            time.sleep(SAMPLE_EVERY_S)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{name} failed: {errors.read_text()}")
    samples.append((elapsed, samples[-1][1] if samples else 0.0))
    return Measured(name, elapsed, samples, usage.ru_maxrss / 1024, output.stat().st_size)


def run_all(num_requests: int, folder: Path) -> list[Measured]:
    workload = folder / "long_run.toml"
    workload.write_text(stream_workload(num_requests))
    base = ["--model", "tape"]
    table, jsonl, trace = folder / "table.txt", folder / "lines.jsonl", folder / "t.duckdb"
    return [
        measure("run (table)", ["run", str(workload), *base], table, table),
        measure("run --jsonl", ["run", str(workload), *base, "--jsonl"], jsonl, jsonl),
        measure("record", ["record", str(workload), *base, "-o", str(trace)], folder / "o", trace),
    ]


@dataclass
class Recording:
    """One run of `recording_rss.py`: RSS by steps recorded, then after close."""

    name: str
    samples: list[tuple[int, float]]  # (step, RSS MB)
    recording_peak_mb: float
    after_close_mb: float
    max_rss_mb: float
    trace_bytes: int

    def at(self, fraction: float) -> float:
        """The median RSS of the samples within 5 % of the run of `fraction` of its steps.

        One sample would land anywhere on the writer's sawtooth (rows held until the
        next checkpoint); the window spans a few of its periods.
        """
        last = self.samples[-1][0]
        near = [rss for step, rss in self.samples if abs(step - fraction * last) <= 0.05 * last]
        return statistics.median(near)

    def from_first_tenth(self) -> list[tuple[int, float]]:
        return [s for s in self.samples if s[0] >= 0.1 * self.samples[-1][0]]

    def trend_mb(self) -> float:
        """The least-squares line through the samples from 10 % on: its rise to 100 %."""
        points = self.from_first_tenth()
        steps = [step for step, _ in points]
        mean_step = sum(steps) / len(steps)
        mean_rss = sum(rss for _, rss in points) / len(points)
        covariance = sum((step - mean_step) * (rss - mean_rss) for step, rss in points)
        variance = sum((step - mean_step) ** 2 for step in steps)
        return covariance / variance * (steps[-1] - steps[0])


def sample_recording(
    name: str, workload: Path, trace: Path, every: int, *, engine_only: bool, source: Path | None
) -> Recording:
    """Run `recording_rss.py` in its own process (`source`: the stepscope it imports)."""
    script = Path(__file__).with_name("recording_rss.py")
    command = [sys.executable, str(script), str(workload), str(trace), "--every", str(every)]
    env = dict(os.environ, PYTHONPATH=str(source)) if source else None
    done = subprocess.run(
        command + (["--engine-only"] if engine_only else []),
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"{name} failed: {done.stderr}")
    figures = json.loads(done.stdout)
    return Recording(name, [tuple(s) for s in figures.pop("samples")], **figures)


Runs = tuple[Recording, Recording, Recording | None]
"""Recorded, engine alone, and recorded by the baseline's code (if one was given)."""


def run_recordings(*, quick: bool, folder: Path, baseline: Path | None) -> list[Runs]:
    """Each run on a million steps of chat traffic and on 10,000 concurrent requests."""
    num_steps, concurrent = (100_000, 2_000) if quick else (1_000_000, 10_000)
    million = folder / "million.toml"
    million.write_text(
        MILLION_STEP_TRAFFIC.format(num_requests=num_steps // 10 + 1000, num_steps=num_steps)
    )
    wide = folder / "concurrent.toml"
    blocks = concurrent * (64 + 300 + 15) // 16 + 1
    wide.write_text(CONCURRENT_WORKLOAD.format(num_requests=concurrent, num_blocks=blocks))
    cases = [(f"{num_steps:,} steps", million, num_steps // 1000),
             (f"{concurrent:,} concurrent", wide, 1)]  # fmt: skip
    runs: list[Runs] = []
    for name, workload, every in cases:
        trace, old_trace = folder / f"{workload.stem}.duckdb", folder / f"{workload.stem}-0.duckdb"
        before = None
        if baseline is not None:
            before = sample_recording(f"record {name}, baseline", workload, old_trace, every,
                                      engine_only=False, source=baseline)  # fmt: skip
        recorded = sample_recording(
            f"record {name}", workload, trace, every, engine_only=False, source=None
        )
        alone = sample_recording(
            f"engine alone, {name}", workload, trace, every, engine_only=True, source=None
        )
        runs.append((recorded, alone, before))
    return runs


def _recording_row(run: Recording, *, closing: bool) -> str:
    cells = [f"{run.at(f):.0f} MB" for f in FRACTIONS]
    low = min(rss for _, rss in run.from_first_tenth())
    high = max(rss for _, rss in run.from_first_tenth())
    close = ["", "", "", ""]
    if closing:
        close = [f"{run.recording_peak_mb:.0f} MB", f"{run.after_close_mb:.0f} MB",
                 f"{run.max_rss_mb:.0f} MB", f"{run.trace_bytes / 1e6:.1f} MB"]  # fmt: skip
    return (
        f"| `{run.name}` | {' | '.join(cells)} | {low:.0f}–{high:.0f} MB | "
        f"{run.trend_mb():+.1f} MB | {' | '.join(close)} |"
    )


def recording_report(runs: list[Runs]) -> str:
    rows = [
        "| run | 10 % | 50 % | 100 % | min–max from 10 % | trend 10 → 100 % | peak recording "
        "| after close | max RSS | trace |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for recorded, alone, before in runs:
        if before is not None:
            rows.append(_recording_row(before, closing=True))
        rows += [_recording_row(recorded, closing=True), _recording_row(alone, closing=False)]
        own = [recorded.at(f) - alone.at(f) for f in FRACTIONS]
        rows.append(
            f"| recorder's own ({recorded.name.removeprefix('record ')}) | "
            + " | ".join(f"{mb:+.0f} MB" for mb in own)
            + f" | | {recorded.trend_mb() - alone.trend_mb():+.1f} MB | | | | |"
        )
    note = (
        "Each run in its own process (`recording_rss.py`): `record_workload` as `stepscope "
        "record --model tape --flush-every 4096` runs it (no progress bar), or the same engine "
        "loop with no recorder (engine alone); baseline: the code given by `--baseline`. RSS "
        "read in the process by a step sink (every 1,000 steps of the million, every step of "
        "the concurrent run); cells: the median of the samples within 5 % of the run of that "
        "fraction of the steps recorded (95–100 % for 100 %); trend: the "
        "least-squares line through the samples from 10 % on, its rise from the first to the "
        "last; peak recording: VmHWM at the last step; after close: the trace closed and "
        "compacted; max RSS: the process's peak, the close included."
    )
    return "\n".join(rows) + "\n\n" + note


def report(num_requests: int, results: list[Measured]) -> str:
    def mark(*, ok: bool) -> str:
        return "ok" if ok else "over goal"

    rows = [
        "| command | 10 % | 50 % | 100 % | max RSS | output | goal |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    jsonl_s = next(r.wall_s for r in results if r.name == "run --jsonl")
    for result in results:
        cells = [f"{t:.1f} s, {rss:.0f} MB" for t, rss in map(result.at, FRACTIONS)]
        goals = [f"RSS < {GOAL_RSS_MB} MB ({mark(ok=result.max_rss_mb < GOAL_RSS_MB)})"]
        if result.name == "run (table)":
            ratio = result.wall_s / jsonl_s
            ok = mark(ok=ratio <= GOAL_TABLE_RATIO)
            goals.append(f"time {ratio:.2f}x --jsonl's, ≤ {GOAL_TABLE_RATIO} ({ok})")
        rows.append(
            f"| `{result.name}` | {' | '.join(cells)} | {result.max_rss_mb:.0f} MB | "
            f"{result.output_bytes / 1e6:.1f} MB | {'; '.join(goals)} |"
        )
    note = (
        f"{num_requests:,} requests (64 + 600 tokens, one every 3 steps), tape model; each cell is "
        f"elapsed time and RSS at that fraction of the process's wall time (RSS sampled every "
        f"{SAMPLE_EVERY_S} s, progress by elapsed time); max RSS is the kernel's peak."
    )
    return "\n".join(rows) + "\n\n" + note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000, help="requests (default 10,000)")
    parser.add_argument("--quick", action="store_true", help="1,000 requests")
    parser.add_argument(
        "--recording", action="store_true", help="record 1M steps and 10,000 concurrent requests"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="SRC",
        help="with --recording: also record with the stepscope package under SRC (older code)",
    )
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    args = parser.parse_args()
    if args.recording:
        with tempfile.TemporaryDirectory() as folder:
            text = recording_report(
                run_recordings(quick=args.quick, folder=Path(folder), baseline=args.baseline)
            )
        print(text)
        if args.results:
            write_section(
                args.results, "long_recording", f"{heading('long_run.py --recording')}\n\n{text}"
            )
        return
    num_requests = 1_000 if args.quick else args.requests
    with tempfile.TemporaryDirectory() as folder:
        results = run_all(num_requests, Path(folder))
    text = report(num_requests, results)
    print(text)
    if args.results:
        write_section(args.results, "long_run", f"{heading('long_run.py')}\n\n{text}")


if __name__ == "__main__":
    main()
