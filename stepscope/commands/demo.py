"""`stepscope demo`: record a bundled example and open the TUI on it."""

from __future__ import annotations

import tempfile
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from stepscope.engine import ModelRunner, TapeModelRunner, Workload, load_workload
from stepscope.inputs import tapes
from stepscope.tracer.record_workload import record_workload

DEMO_WORKLOAD = "preemption_storm.json"
"""24 chats that outgrow a 40-block KV pool: storms of preemptions to step through."""


def _model_runner(workload: Workload) -> ModelRunner:
    """The workload's recorded outputs: the demo needs no torch (`--model tiny` does)."""
    return TapeModelRunner(tapes(workload))


def demo(
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Where to write the trace (default: a temp folder)."),
    ] = None,
    no_tui: Annotated[
        bool, typer.Option("--no-tui", help="Record the trace and print its path; no TUI.")
    ] = False,
) -> None:
    """Record the bundled preemption-storm example and open the TUI on it."""
    bundled = resources.files("stepscope").joinpath("workloads", DEMO_WORKLOAD)
    with resources.as_file(bundled) as path:
        workload = load_workload(path)
    if output is None:
        output = Path(tempfile.mkdtemp(prefix="stepscope-demo-")) / "preemption_storm.duckdb"
    summary = record_workload(workload, _model_runner(workload), output)
    Console(stderr=True).print(
        f"recorded {summary.num_steps} steps of {len(workload.requests)} requests to {output}",
        highlight=False,
    )
    if no_tui:
        return
    from stepscope.tui import run_tui

    run_tui(output)
