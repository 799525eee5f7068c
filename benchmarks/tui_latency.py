"""TUI latency on a 1,000,000-step trace: open to first paint, and a next-step key to repaint;
and open to first paint on a 10,000,000-step one.

    python benchmarks/tui_latency.py --trace PATH [--trace-10m PATH10] [--results RESULTS.md]
    python benchmarks/tui_latency.py --trace PATH --baseline SRC [--rounds N] [--results RESULTS.md]
    python benchmarks/tui_latency.py --trace PATH --replay-only [--results RESULTS.md]

PATH is a trace from `tracer_overhead.py --generate-1m PATH` (made there when it does
not exist; that takes a while); PATH10 (default: beside PATH, its name with 10m for 1m)
is ten copies of it end to end, from `tiled_trace.py` (made when it does not exist, in
about half a minute). The app runs headless (Textual's `run_test`), so a "paint" is
the compositor rendering a frame, as it does for a terminal.

- first paint, in process: from creating the app to the first frame that shows step
  rows (trace opened in a worker, first page of steps read as Arrow, rendered);
  median of 5 opens.
- first paint, whole process: a fresh `python` that imports stepscope's TUI and opens
  the trace, until it prints that the first rows were painted (imports included).
- next step: `j` is sent as a key event 200 times, each the moment the previous
  step's detail is on screen; for each, the time until the frame with the cursor on
  the new row is rendered, and until the step detail (read in a worker) shows the new
  step and is rendered. Median and p90.
- next step after a pause: the same, 200 times, with 150 ms between one step's
  detail showing and the next key (a person reading the step), so the next step's
  detail has been read ahead.
- 10M steps: first paint in process (median of 5) and whole process (median of 3),
  opens of the two traces alternating; the child imports only the TUI (the
  benchmark's trace generators are imported in `main`).

- first replayed step after `p` (also alone, `--replay-only`): the timeline's cursor
  put on the step at 10 %, 50 % and 99 % of the trace (its detail shown), then `p`
  sent as a key; the time until the replay screen shows that step, replayed and
  compared (its log row and both sides rendered). The rest of the replay is then
  stopped. Each in a fresh app, once; with where the time went (`replay_phases`).

With `--baseline SRC` (the `stepscope` package found under SRC: an older commit laid
out as installed, `make installed INSTALLED=SRC`) it measures the step detail only,
this code and the baseline's in turns, each in a fresh process, `--rounds` of each:
the key to the repainted detail as above, and `TraceSource.step_detail` read directly
for every non-idle step whose number is a multiple of 1,657 (each read once: no cache
hits). Figures: the median over the rounds of each process's median and p90.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from results import heading, write_section
from stepscope.tui.app import StepscopeApp
from stepscope.tui.widgets.step_detail import StepDetailView
from stepscope.tui.widgets.step_table import StepTable
from textual import events
from textual.pilot import Pilot

GOAL_FIRST_PAINT_S = 1.0
GOAL_FIRST_REPLAYED_S = 1.0
REPLAY_AT = (0.10, 0.50, 0.99)
GOAL_NEXT_STEP_MS = 50.0
SIZE = (160, 48)
PRESSES = 200
OPENS = 5
PAUSE_S = 0.15


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)]


def table_of(app: StepscopeApp) -> StepTable | None:
    tables = app.screen.query(StepTable)
    return tables.first() if tables else None


async def first_rows_painted(app: StepscopeApp, pilot: Pilot[Any]) -> None:
    """Wait until the step table holds its first page, then render that frame."""
    while True:
        table = table_of(app)
        if table is not None and table.num_steps and table.has_first_page:
            break
        await asyncio.sleep(0.001)
    await pilot.pause(0)


async def open_once(path: Path) -> tuple[float, int]:
    started = time.perf_counter()
    app = StepscopeApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await first_rows_painted(app, pilot)
        elapsed = time.perf_counter() - started
        table = table_of(app)
        assert table is not None
        return elapsed, table.num_steps


async def next_step_presses(
    path: Path, presses: int, pause_s: float = 0.0
) -> tuple[list[float], list[float]]:
    app = StepscopeApp(path)
    cursor_ms, detail_ms = [], []
    async with app.run_test(size=SIZE) as pilot:
        await first_rows_painted(app, pilot)
        await app.workers.wait_for_complete()
        await pilot.pause(0)
        table = app.screen.query_one(StepTable)
        detail = app.screen.query_one("#detail-a", StepDetailView)
        driver = app._driver
        assert driver is not None
        for _ in range(presses):
            if pause_s:
                await asyncio.sleep(pause_s)
            target = table.cursor_step + 1
            started = time.perf_counter()
            key = events.Key("j", "j")
            key.set_sender(app)
            driver.send_message(key)
            while table.cursor_step != target:
                await asyncio.sleep(0)
            await pilot.pause(0)
            cursor_ms.append((time.perf_counter() - started) * 1e3)
            while detail.detail is None or detail.detail.step != target:
                await asyncio.sleep(0.0005)
            await pilot.pause(0)
            detail_ms.append((time.perf_counter() - started) * 1e3)
    return cursor_ms, detail_ms


async def first_replayed_step(path: Path, fraction: float) -> dict[str, Any]:
    """`p` on the step at `fraction` of the trace, to that step replayed on screen."""
    from stepscope.tui.screens.replay import ReplayScreen
    from stepscope.tui.screens.timeline import TimelineScreen

    app = StepscopeApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await first_rows_painted(app, pilot)
        await app.workers.wait_for_complete()
        table = app.screen.query_one(StepTable)
        step = int(fraction * (table.num_steps - 1))
        timeline = app.screen
        assert isinstance(timeline, TimelineScreen)
        timeline.go_to(step)
        detail = app.screen.query_one("#detail-a", StepDetailView)
        while detail.detail is None or detail.detail.step != step:
            await asyncio.sleep(0.001)
        await app.workers.wait_for_complete()
        await pilot.pause(0)
        driver = app._driver
        assert driver is not None
        started = time.perf_counter()
        key = events.Key("p", "p")
        key.set_sender(app)
        driver.send_message(key)
        while not (isinstance(app.screen, ReplayScreen) and app.screen.last is not None):
            await asyncio.sleep(0.001)
        await pilot.pause(0)
        elapsed = time.perf_counter() - started
        screen = app.screen
        assert screen.last is not None and screen.last.step == step, screen.last
        session = screen.session
        assert session is not None and session.start is not None
        start = session.start
        session.stop()
        await app.workers.wait_for_complete()
    return {"fraction": fraction, "step": step, "seconds": elapsed, "start": start.describe()}


def replay_phases(path: Path, step: int) -> dict[str, float]:
    """Where a replay from `step` spends its time before the step shows, phase by phase."""
    from stepscope.replay import exact, from_step
    from stepscope.tui import replay_session

    spent: dict[str, float] = {}

    def timed(module: Any, name: str, key: str) -> None:
        inner = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            begun = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[key] = spent.get(key, 0.0) + time.perf_counter() - begun

        setattr(module, name, wrapper)

    patched = [
        (from_step, "workload_from_trace", "reading the window's workload"),
        (from_step, "read_checkpoint", "reading the checkpoint"),
        (from_step, "run_silently", "the silent run to the step"),
        (exact, "fingerprints", "fingerprinting the window of both traces"),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in patched]
    for module, name, key in patched:
        timed(module, name, key)

    class Shown(Exception):
        pass

    def shown(*_: Any) -> None:
        raise Shown

    begun = time.perf_counter()
    try:
        session = replay_session.ReplaySession(path, at_step=step)
        try:
            session.record(on_head=shown)
        except Shown:
            pass
        finally:
            session.close()
    finally:
        for module, name, inner in saved:
            setattr(module, name, inner)
    total = time.perf_counter() - begun
    spent["everything else (recording the first steps, reading rows)"] = total - sum(spent.values())
    spent["total"] = total
    return spent


def replay_figures(path: Path) -> dict[str, Any]:
    shown = []
    for fraction in REPLAY_AT:
        shown.append(asyncio.run(first_replayed_step(path, fraction)))
        gc.collect()
    phases = replay_phases(path, shown[1]["step"])
    return {"replay_shown": shown, "replay_phases": phases, "replay_phases_step": shown[1]["step"]}


def replay_rows(figures: dict[str, Any]) -> list[str]:
    rows = []
    for done in figures["replay_shown"]:
        seconds = done["seconds"]
        rows.append(
            f"| `p` at {done['fraction']:.0%} (step {done['step']:,}) → that step replayed "
            f"on screen; {done['start']} | {seconds:.2f} s | ≤ {GOAL_FIRST_REPLAYED_S:.0f} s "
            f"({mark(ok=seconds <= GOAL_FIRST_REPLAYED_S)}) |"
        )
    return rows


def replay_report(figures: dict[str, Any]) -> str:
    rows = ["| figure | value | goal |", "|---|---:|---|", *replay_rows(figures)]
    phases = figures["replay_phases"]
    step = figures["replay_phases_step"]
    parts = [f"| phase (a replay from step {step:,}, outside the app) | seconds |", "|---|---:|"]
    parts += [f"| {name} | {seconds:.2f} |" for name, seconds in phases.items()]
    return "\n".join(rows) + "\n\n" + "\n".join(parts)


_CHILD = """
import asyncio, sys, time
from pathlib import Path
sys.path.insert(0, {benchmarks!r})
from tui_latency import open_once
elapsed, steps = asyncio.run(open_once(Path({path!r})))
print("painted", steps, flush=True)
"""


def whole_process_first_paint(path: Path) -> float:
    script = _CHILD.format(benchmarks=str(Path(__file__).parent), path=str(path))
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    elapsed = time.perf_counter() - started
    child.wait()
    assert line.startswith("painted"), line
    return elapsed


def first_paints(paths: list[Path], opens: int) -> list[dict[str, Any]]:
    """Open to first paint of each trace, in process then whole process, the traces alternating."""
    in_process: list[list[float]] = [[] for _ in paths]
    whole: list[list[float]] = [[] for _ in paths]
    num_steps = [0 for _ in paths]
    for _ in range(opens):
        for index, path in enumerate(paths):
            elapsed, num_steps[index] = asyncio.run(open_once(path))
            in_process[index].append(elapsed)
            gc.collect()
    for _ in range(3):
        for times, path in zip(whole, paths, strict=True):
            times.append(whole_process_first_paint(path))
    return [
        {
            "num_steps": steps,
            "size_mb": path.stat().st_size / 1e6,
            "first_paint_s": statistics.median(times),
            "first_paint_max_s": max(times),
            "process_first_paint_s": statistics.median(process_times),
        }
        for path, steps, times, process_times in zip(
            paths, num_steps, in_process, whole, strict=True
        )
    ]


def measure(path: Path, path_10m: Path, presses: int, opens: int) -> dict[str, Any]:
    # Each phase starts clean: apps of an earlier phase leave garbage whose collection
    # would land inside this one's timings.
    cursor_ms, detail_ms = asyncio.run(next_step_presses(path, presses))
    gc.collect()
    _, paused_detail_ms = asyncio.run(next_step_presses(path, presses, PAUSE_S))
    gc.collect()
    opened, opened_10m = first_paints([path, path_10m], opens)
    return {
        **opened,
        "ten_m": opened_10m,
        "presses": presses,
        "opens": opens,
        "cursor_median_ms": statistics.median(cursor_ms),
        "cursor_p90_ms": percentile(cursor_ms, 0.9),
        "detail_median_ms": statistics.median(detail_ms),
        "detail_p90_ms": percentile(detail_ms, 0.9),
        "paused_median_ms": statistics.median(paused_detail_ms),
        "paused_p90_ms": percentile(paused_detail_ms, 0.9),
    }


def detail_reads_ms(path: Path) -> list[float]:
    """`step_detail` of every non-idle step that is a multiple of 1,657, each read once."""
    from stepscope.tui.trace_source import TraceSource

    source = TraceSource(path)
    query = "SELECT step FROM _steps WHERE NOT idle AND step % 1657 = 0 ORDER BY step"
    steps = [row[0] for row in source.trace.sql(query).fetchall()]
    times = []
    for step in steps:
        started = time.perf_counter()
        source.step_detail(step)
        times.append((time.perf_counter() - started) * 1e3)
    source.close()
    return times


def detail_figures(path: Path, presses: int) -> dict[str, float]:
    """One process's step-detail figures (the `--baseline` child)."""
    reads = detail_reads_ms(path)
    _, detail_ms = asyncio.run(next_step_presses(path, presses))
    return {
        "read_median_ms": statistics.median(reads),
        "read_p90_ms": percentile(reads, 0.9),
        "detail_median_ms": statistics.median(detail_ms),
        "detail_p90_ms": percentile(detail_ms, 0.9),
    }


def detail_child(path: Path, presses: int, baseline: Path | None) -> dict[str, float]:
    env = dict(os.environ)
    if baseline is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(baseline), env.get("PYTHONPATH", "")])
    command = [sys.executable, __file__, "--trace", str(path), "--child", "--presses", str(presses)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def against_baseline(path: Path, baseline: Path, rounds: int, presses: int) -> str:
    """This code's step detail and the baseline's, in turns, as a table."""
    runs: dict[str, list[dict[str, float]]] = {"this code": [], "baseline": []}
    for index in range(rounds):
        order = ("this code", "baseline") if index % 2 else ("baseline", "this code")
        for name in order:
            runs[name].append(detail_child(path, presses, baseline if name == "baseline" else None))
    medians = {
        name: {key: statistics.median(run[key] for run in done) for key in done[0]}
        for name, done in runs.items()
    }
    ours, theirs = medians["this code"], medians["baseline"]
    rows = ["| figure | this code | baseline | this / baseline |", "|---|---:|---:|---:|"]
    for key, what in (
        ("read", "`step_detail` read, cache miss"),
        ("detail", "next-step key → step detail repainted"),
    ):
        for stat in ("median", "p90"):
            name = f"{key}_{stat}_ms"
            rows.append(
                f"| {what}, {stat} | {ours[name]:.1f} ms | {theirs[name]:.1f} ms | "
                f"{ours[name] / theirs[name]:.2f} |"
            )
    spread = "; ".join(
        f"{name}: detail medians {_span(done, 'detail_median_ms')}, "
        f"reads {_span(done, 'read_median_ms')}"
        for name, done in runs.items()
    )
    note = (
        f"Trace: {path.name}; {rounds} processes of each, in turns; {presses} presses of `j` "
        f"each; the medians of the processes' figures. Spread over the processes: {spread}."
    )
    return "\n".join(rows) + "\n\n" + note


def _span(runs: list[dict[str, float]], key: str) -> str:
    values = [run[key] for run in runs]
    return f"{min(values):.1f}–{max(values):.1f} ms"


def mark(*, ok: bool) -> str:
    return "ok" if ok else "over goal"


def first_paint_rows(figures: dict[str, Any], opens: int, label: str = "") -> list[str]:
    first, process = figures["first_paint_s"], figures["process_first_paint_s"]
    return [
        f"| {label}open to first paint, in process (median of {opens}; worst) | "
        f"{first:.2f} s ({figures['first_paint_max_s']:.2f} s) | ≤ {GOAL_FIRST_PAINT_S:.0f} s "
        f"({mark(ok=first <= GOAL_FIRST_PAINT_S)}) |",
        f"| {label}open to first paint, whole process (python start, imports included) | "
        f"{process:.2f} s | ≤ {GOAL_FIRST_PAINT_S:.0f} s "
        f"({mark(ok=process <= GOAL_FIRST_PAINT_S)}) |",
    ]


def report(figures: dict[str, Any]) -> str:
    goal_ms = GOAL_NEXT_STEP_MS
    rows = ["| figure | value | goal |", "|---|---:|---|"]
    rows += first_paint_rows(figures, figures["opens"])
    for name, what in (
        ("cursor", "cursor row repainted"),
        ("detail", "step detail repainted"),
        ("paused", f"step detail repainted, keys {PAUSE_S * 1e3:.0f} ms apart"),
    ):
        median, p90 = figures[f"{name}_median_ms"], figures[f"{name}_p90_ms"]
        rows.append(
            f"| next-step key → {what}, median / p90 | {median:.1f} / {p90:.1f} ms | "
            f"≤ {goal_ms:.0f} ms ({mark(ok=p90 <= goal_ms)}) |"
        )
    if "replay_shown" in figures:
        rows += replay_rows(figures)
    ten_m = figures["ten_m"]
    rows += first_paint_rows(ten_m, figures["opens"], f"{ten_m['num_steps'] / 1e6:.0f}M steps: ")
    note = (
        f"Trace: {figures['num_steps']:,} steps, {figures['size_mb']:.1f} MB "
        f"(`tracer_overhead.py --generate-1m`); {ten_m['num_steps']:,} steps, "
        f"{ten_m['size_mb']:.1f} MB (ten copies of it end to end, `tiled_trace.py`); "
        f"terminal {SIZE[0]}×{SIZE[1]}, headless; {figures['presses']} presses of `j`, "
        "each waited out before the next; opens of the two traces alternate."
    )
    return "\n".join(rows) + "\n\n" + note


def main() -> None:
    from tiled_trace import tile_trace
    from tracer_overhead import generate_million_step_trace

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, required=True, help="a 1,000,000-step trace")
    parser.add_argument("--trace-10m", type=Path, help="ten copies of it (made when missing)")
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--presses", type=int, default=PRESSES)
    parser.add_argument("--opens", type=int, default=OPENS)
    parser.add_argument("--baseline", type=Path, help="compare the step detail with SRC's")
    parser.add_argument("--rounds", type=int, default=5, help="processes of each, --baseline")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--replay-only", action="store_true", help="only the first replayed step after `p`"
    )
    args = parser.parse_args()
    if args.child:
        print(json.dumps(detail_figures(args.trace, args.presses)))
        return
    if args.replay_only:
        if not args.trace.exists():
            generate_million_step_trace(args.trace)
        text = replay_report(replay_figures(args.trace))
        print(text)
        if args.results:
            name = "tui_latency_replay"
            section = f"{heading('tui_latency.py --replay-only')}\n\n{text}"
            write_section(args.results, name, section)
        return
    if args.baseline is not None:
        text = against_baseline(args.trace, args.baseline, args.rounds, args.presses)
        print(text)
        if args.results:
            name = "tui_latency_baseline"
            write_section(args.results, name, f"{heading('tui_latency.py --baseline')}\n\n{text}")
        return
    path_10m = args.trace_10m or args.trace.with_name(args.trace.name.replace("1m", "10m"))
    if not args.trace.exists():
        generate_million_step_trace(args.trace)
    if path_10m == args.trace:
        parser.error("--trace-10m: name the 10M-step trace (PATH has no '1m' to replace)")
    if not path_10m.exists():
        tile_trace(args.trace, path_10m, copies=10)
    figures = measure(args.trace, path_10m, args.presses, args.opens)
    figures.update(replay_figures(args.trace))
    text = report(figures)
    print(text)
    if args.results:
        write_section(args.results, "tui_latency", f"{heading('tui_latency.py')}\n\n{text}")


if __name__ == "__main__":
    main()
