"""`stepscope record`: run a workload with the recorder on and write a trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from stepscope.engine import StepRecord, TapeModelRunner
from stepscope.inputs import apply_knobs, load_workload_arg, tapes
from stepscope.tracer.record import record_workload
from stepscope.tracer.redact import Redactor

from .options import KnobsOption


def record(
    workload: Annotated[
        Path | None,
        typer.Argument(help="Workload JSON. Default: the bundled example."),
    ] = None,
    output: Annotated[
        Path, typer.Option("-o", "--output", help="The trace file to write (must not exist).")
    ] = Path("trace.duckdb"),
    knobs: KnobsOption = None,
    redact: Annotated[
        bool,
        typer.Option(
            "--redact",
            help="Store keyed pseudonyms instead of token ids (equality survives; replay works).",
        ),
    ] = False,
    flush_every: Annotated[
        int, typer.Option("--flush-every", min=1, help="Steps per write to the file.")
    ] = 256,
) -> None:
    """Run a workload and record every step into a DuckDB trace."""
    loaded = apply_knobs(load_workload_arg(workload), knobs or [])
    console = Console(stderr=True)
    progress = Progress(
        TextColumn("[cyan]step {task.fields[step]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("requests done"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    task = progress.add_task("record", total=len(loaded.requests), step=0)

    def on_step(record: StepRecord) -> None:
        done = len(record.rejected) + len(record.aborted)
        if record.engine_step is not None:
            done += sum(1 for o in record.engine_step.outputs if o.finish_reason is not None)
        progress.update(task, advance=done, step=record.step)

    with progress:
        summary = record_workload(
            loaded,
            TapeModelRunner(tapes(loaded)),
            output,
            redactor=Redactor() if redact else None,
            on_step=on_step,
            flush_every_steps=flush_every,
        )
    size_mb = output.stat().st_size / 1e6
    state = "complete" if summary.complete else "incomplete"
    console.print(
        f"recorded {summary.num_steps} steps of {len(loaded.requests)} requests "
        f"to {output} ({size_mb:.2f} MB, {state})",
        highlight=False,
    )
