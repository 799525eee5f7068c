"""`stepscope doctor` on a 1,000,000-step trace against `stepscope info` on the same trace,
in turns in one run; and with what-ifs, over a window of its last steps.

    python benchmarks/doctor_speed.py [--trace PATH] [--rounds N] [--window STEPS]
                                      [--results RESULTS.md]

Without `--trace` the 1,000,000-step chat trace of `tracer_overhead.py --generate-1m` is
made at /tmp/bench/chat1m.duckdb (about two and a half minutes) unless it is there. Each
figure is the wall time of a fresh `stepscope` process, as a user runs it; `info` and
`doctor --no-what-if` alternate, the order turning each round, and the table gives the
medians. `doctor` with what-ifs runs once, over the last `--window` steps (its replays
start from the nearest checkpoint, in parallel on every core).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from results import heading, write_section

DEFAULT_TRACE = Path("/tmp/bench/chat1m.duckdb")


def seconds(*args: str) -> tuple[float, str]:
    """The wall time of one `stepscope` command, and what it printed."""
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", *args], capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"stepscope {' '.join(args)}: exit {result.returncode}: {result.stderr}")
    return elapsed, result.stdout


def num_steps(trace: Path) -> int:
    _, out = seconds("info", str(trace), "--json")
    return int(json.loads(out)["summary"]["num_steps"])


def measure(trace: Path, rounds: int, window: int) -> dict[str, object]:
    times: dict[str, list[float]] = {"info": [], "doctor": []}
    for index in range(rounds):
        order = ("info", "doctor") if index % 2 == 0 else ("doctor", "info")
        for name in order:
            args = (
                ["info", str(trace)]
                if name == "info"
                else ["doctor", str(trace), "--no-what-if", "--json"]
            )
            elapsed, out = seconds(*args)
            times[name].append(elapsed)
            if name == "doctor":
                kinds = [f["kind"] for f in json.loads(out)["findings"]]
    steps = num_steps(trace)
    first = max(steps - window, 0)
    what_if_s, out = seconds("doctor", str(trace), "--from-step", str(first), "--json")
    cured = [f["kind"] for f in json.loads(out)["findings"] if f["what_if"] is not None]
    found = [f["kind"] for f in json.loads(out)["findings"]]
    return {
        "trace": trace, "steps": steps, "rounds": rounds, "window": (first, steps - 1),
        "info_s": statistics.median(times["info"]), "doctor_s": statistics.median(times["doctor"]),
        "info_all": times["info"], "doctor_all": times["doctor"], "kinds": kinds,
        "what_if_s": what_if_s, "window_kinds": found, "cured": cured,
    }  # fmt: skip


def report(f: dict[str, object]) -> str:
    info_s, doctor_s = float(f["info_s"]), float(f["doctor_s"])  # type: ignore[arg-type]
    first, last = f["window"]  # type: ignore[misc]
    rows = [
        "| figure | seconds |",
        "|---|---:|",
        f"| `stepscope info` (median of {f['rounds']}) | {info_s:.2f} |",
        f"| `stepscope doctor --no-what-if` (median of {f['rounds']}) | {doctor_s:.2f} |",
        f"| doctor / info | {doctor_s / info_s:.2f} |",
        f"| `stepscope doctor --from-step {first}` (what-ifs over steps {first}..{last}, once) "
        f"| {float(f['what_if_s']):.2f} |",  # type: ignore[arg-type]
    ]
    return "\n".join([
        heading("doctor_speed.py"), "", *rows, "",
        f"Trace: {f['trace']}, {f['steps']:,} steps. Every run: info "
        f"{', '.join(f'{t:.2f}' for t in f['info_all'])} s; doctor "  # type: ignore[attr-defined]
        f"{', '.join(f'{t:.2f}' for t in f['doctor_all'])} s. Findings on the whole trace: "  # type: ignore[attr-defined]
        f"{', '.join(f['kinds']) or 'none'}; in the window: "  # type: ignore[arg-type]
        f"{', '.join(f['window_kinds']) or 'none'}, cured by a what-if: "  # type: ignore[arg-type]
        f"{', '.join(f['cured']) or 'none'}.",  # type: ignore[arg-type]
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, help="the trace (default: the 1M-step chat trace)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=int, default=10_000, help="steps the what-ifs replay")
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    args = parser.parse_args()
    trace = args.trace or DEFAULT_TRACE
    if args.trace is None and not trace.exists():
        from tracer_overhead import generate_million_step_trace

        trace.parent.mkdir(parents=True, exist_ok=True)
        generate_million_step_trace(trace)
    text = report(measure(trace, args.rounds, args.window))
    print(text)
    if args.results:
        write_section(args.results, "doctor_speed", text)


if __name__ == "__main__":
    main()
