"""One recording's RSS by steps recorded, read inside the recording process itself.

    python benchmarks/recording_rss.py WORKLOAD.toml TRACE [--engine-only] [--every N]

Records the workload as `stepscope record --model tape --flush-every 4096` does (its
`record_workload`, without the progress bar), reading the process's VmRSS and VmHWM
every N steps from a step sink. `--engine-only` runs the same loop with no recorder:
what the engine itself holds. Prints one JSON object: the samples (step, RSS MB),
the peak while recording (VmHWM at the last sample), RSS after close (compaction
included) and the peak of the whole process.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from pathlib import Path

from stepscope.engine import EngineLoop, StepRecord, TapeModelRunner
from stepscope.tracer.record_workload import record_workload

from stepscope.inputs import load_workload_arg

FLUSH_EVERY = 4096


def status_mb(pid: int | str = "self") -> dict[str, float]:
    """VmRSS and VmHWM (the peak so far) of process `pid` (this one by default), in MB;
    OSError once the process is gone."""
    figures = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("VmRSS", "VmHWM"):
            figures[key] = int(line.split()[1]) / 1024
    return figures


class RssSampler:
    """A step sink that reads this process's RSS every `every` steps."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.samples: list[tuple[int, float]] = []
        self.peak_mb = 0.0

    def on_step(self, record: StepRecord, scheduler: object) -> None:
        if record.step % self.every == 0:
            figures = status_mb()
            self.samples.append((record.step, figures["VmRSS"]))
            self.peak_mb = figures["VmHWM"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", type=Path)
    parser.add_argument("trace", type=Path)
    parser.add_argument("--engine-only", action="store_true", help="no recorder attached")
    parser.add_argument("--every", type=int, default=1, help="steps between samples")
    args = parser.parse_args()
    workload = load_workload_arg(args.workload)
    sampler = RssSampler(args.every)
    runner = TapeModelRunner.for_workload(workload)
    if args.engine_only:
        loop = EngineLoop(workload, runner, keep_output_tokens=False, keep_finishes=False)
        for record in loop.run():
            sampler.on_step(record, loop.core.scheduler)
    else:
        record_workload(
            workload, runner, args.trace, sinks=[sampler], flush_every_steps=FLUSH_EVERY
        )
    result = {
        "samples": sampler.samples,
        "recording_peak_mb": sampler.peak_mb,
        "after_close_mb": status_mb()["VmRSS"],
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "trace_bytes": args.trace.stat().st_size if args.trace.exists() else 0,
    }
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
