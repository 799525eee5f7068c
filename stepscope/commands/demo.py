"""`stepscope demo`: record a bundled example and open the TUI on it."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from stepscope.engine import ModelRunner, TapeModelRunner, Workload, load_workload
from stepscope.inputs import tapes
from stepscope.output_paths import check_outputs, new_file
from stepscope.safe_text import safe_text
from stepscope.tracer.record_workload import record_workload

DEMO_WORKLOAD = "preemption_storm.json"
"""24 chats that outgrow a 40-block KV pool: storms of preemptions to step through."""


def demo_path() -> Path:
    """One fixed place, rewritten by each run, so repeated demos leave nothing behind."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "stepscope" / "demo" / "preemption_storm.duckdb"


def _clear(output: Path) -> None:
    """The previous demo's trace and its write-ahead log, if any."""
    output.parent.mkdir(parents=True, exist_ok=True)
    for path in (output, output.with_name(output.name + ".wal")):
        path.unlink(missing_ok=True)


def _model_runner(workload: Workload) -> ModelRunner:
    """The workload's recorded outputs: the demo needs no torch (`--model tiny` does)."""
    return TapeModelRunner(tapes(workload))


def demo(
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Where to write the trace (default: one file under ~/.cache/stepscope/demo, "
            "rewritten each run).",
        ),
    ] = None,
    *,
    no_tui: Annotated[
        bool, typer.Option("--no-tui", help="Record the trace and print its path; no TUI.")
    ] = False,
) -> None:
    """Record the bundled preemption-storm example and open the TUI on it."""
    bundled = resources.files("stepscope").joinpath("workloads", DEMO_WORKLOAD)
    with resources.as_file(bundled) as path:
        workload = load_workload(path)
    if output is None:
        output = demo_path()
        _clear(output)
    check_outputs([new_file("-o", output)], [])
    summary = record_workload(workload, _model_runner(workload), output)
    Console(stderr=True).print(
        safe_text(
            f"recorded {summary.num_steps} steps of {len(workload.requests)} requests to {output}"
        ),
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
    if no_tui:
        return
    from stepscope import tui

    problem = tui.terminal_problem()
    if problem is not None:
        Console(stderr=True).print(
            safe_text(f"{problem}: open it later with `stepscope tui {output}`"),
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
        return
    tui.run_tui(output)
