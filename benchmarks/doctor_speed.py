"""`stepscope doctor` on a 1,000,000-step trace against `stepscope info` on the same trace,
in turns in one run; and with what-ifs, over a window of its last steps.

    python benchmarks/doctor_speed.py [--trace PATH] [--rounds N] [--window STEPS]
                                      [--baseline SRC] [--results RESULTS.md]

Without `--trace` the 1,000,000-step chat trace of `tracer_overhead.py --generate-1m` is
made at /tmp/bench/chat1m.duckdb (about two and a half minutes) unless it is there. Each
figure is the wall time and the CPU time of a fresh `stepscope` process, as a user runs it;
`info` and `doctor --no-what-if` (and, with `--baseline SRC`, the `doctor` of the
`stepscope` package under SRC, a folder holding an older commit's package) alternate, the
order turning each round, and the table gives the medians, with the load average around
them. The baseline's findings must be this code's, byte for byte. `doctor` with what-ifs
runs once, over the last `--window` steps (its replays start from the nearest checkpoint,
in parallel on every core).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from results import heading, write_section

DEFAULT_TRACE = Path("/tmp/bench/chat1m.duckdb")


@dataclass(frozen=True)
class Timed:
    """One `stepscope` process: its wall and CPU seconds, and what it printed."""

    wall_s: float
    cpu_s: float
    out: str


def run(args: list[str], source: Path | None = None) -> Timed:
    """One `stepscope` command, importing the package under `source` when given (`-P`: not the
    `stepscope/` of the folder it runs in)."""
    env = dict(os.environ, PYTHONPATH=str(source)) if source is not None else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-P", "-m", "stepscope", *args],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"stepscope {' '.join(args)}: exit {result.returncode}: {result.stderr}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return Timed(elapsed, cpu, result.stdout)


def num_steps(trace: Path) -> int:
    return int(json.loads(run(["info", str(trace), "--json"]).out)["summary"]["num_steps"])


def measure(trace: Path, rounds: int, window: int, baseline: Path | None) -> dict[str, object]:
    commands = {
        "info": (["info", str(trace)], None),
        "doctor": (["doctor", str(trace), "--no-what-if", "--json"], None),
    }
    if baseline is not None:
        commands["baseline"] = (commands["doctor"][0], baseline)
    runs: dict[str, list[Timed]] = {name: [] for name in commands}
    load_before = os.getloadavg()[0]
    for index in range(rounds):
        order = list(commands) if index % 2 == 0 else list(commands)[::-1]
        for name in order:
            runs[name].append(run(*commands[name]))
    load_after = os.getloadavg()[0]
    found = runs["doctor"][-1].out
    steps = num_steps(trace)
    first = max(steps - window, 0)
    what_if = run(["doctor", str(trace), "--from-step", str(first), "--json"])
    return {
        "trace": trace, "steps": steps, "rounds": rounds, "window": (first, steps - 1),
        "runs": runs, "load": (load_before, load_after),
        "kinds": [f["kind"] for f in json.loads(found)["findings"]],
        "same_as_baseline": all(r.out == found for r in runs.get("baseline", [])),
        "what_if_s": what_if.wall_s,
        "window_kinds": [f["kind"] for f in json.loads(what_if.out)["findings"]],
        "cured": [f["kind"] for f in json.loads(what_if.out)["findings"]
                  if f["what_if"] is not None],
    }  # fmt: skip


def report(f: dict[str, object]) -> str:
    runs: dict[str, list[Timed]] = f["runs"]  # type: ignore[assignment]
    wall = {name: statistics.median(r.wall_s for r in timed) for name, timed in runs.items()}
    cpu = {name: statistics.median(r.cpu_s for r in timed) for name, timed in runs.items()}
    first, last = f["window"]  # type: ignore[misc]
    load_before, load_after = f["load"]  # type: ignore[misc]

    def row(label: str, name: str) -> str:
        return f"| {label} | {wall[name]:.2f} | {cpu[name]:.2f} |"

    def ratio(label: str, name: str) -> str:
        return f"| {label} | {wall[name] / wall['info']:.2f} | {cpu[name] / cpu['info']:.2f} |"

    rows = [
        f"| figure (median of {f['rounds']}) | wall s | CPU s |",
        "|---|---:|---:|",
        row("`stepscope info`", "info"),
        row("`stepscope doctor --no-what-if`", "doctor"),
        ratio("doctor / info", "doctor"),
    ]
    if "baseline" in runs:
        rows += [row("`doctor --no-what-if` of `--baseline`", "baseline"),
                 ratio("baseline / info", "baseline")]  # fmt: skip
    rows.append(
        f"| `stepscope doctor --from-step {first}` (what-ifs over steps {first}..{last}, once) "
        f"| {float(f['what_if_s']):.2f} | |"  # type: ignore[arg-type]
    )
    every = "; ".join(
        f"{name} {', '.join(f'{r.wall_s:.2f}' for r in timed)} s" for name, timed in runs.items()
    )
    same = "yes" if f["same_as_baseline"] else "NO"
    compared = ""
    if "baseline" in runs:
        compared = f" The baseline's JSON is this code's, byte for byte: {same}."
    return "\n".join([
        heading("doctor_speed.py"), "", *rows, "",
        f"Trace: {f['trace']}, {f['steps']:,} steps. Every run's wall time: {every}; load "
        f"average {load_before:.1f} before the rounds, {load_after:.1f} after.{compared} "
        f"Findings on the whole trace: {', '.join(f['kinds']) or 'none'}; in the window: "  # type: ignore[arg-type]
        f"{', '.join(f['window_kinds']) or 'none'}, cured by a what-if: "  # type: ignore[arg-type]
        f"{', '.join(f['cured']) or 'none'}.",  # type: ignore[arg-type]
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, help="the trace (default: the 1M-step chat trace)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=int, default=10_000, help="steps the what-ifs replay")
    parser.add_argument("--baseline", type=Path, help="also run the stepscope package under SRC")
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    args = parser.parse_args()
    trace = args.trace or DEFAULT_TRACE
    if args.trace is None and not trace.exists():
        from tracer_overhead import generate_million_step_trace

        trace.parent.mkdir(parents=True, exist_ok=True)
        generate_million_step_trace(trace)
    text = report(measure(trace, args.rounds, args.window, args.baseline))
    print(text)
    if args.results:
        write_section(args.results, "doctor_speed", text)


if __name__ == "__main__":
    main()
