"""`stepscope record`: run a workload with the recorder on and write a trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from stepscope.engine import Scheduler, StepRecord, TapeModelRunner
from stepscope.inputs import apply_knobs, load_workload_arg, tapes
from stepscope.tracer.otel import (
    StepSpans,
    exporter_from_env,
    make_span_exporter,
    make_tracer_provider,
)
from stepscope.tracer.record import StepSink, record_workload
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
    otel: Annotated[
        str | None,
        typer.Option(
            "--otel",
            metavar="console|otlp",
            help="Also export OpenTelemetry spans (default: OTEL_TRACES_EXPORTER; otlp reads "
            "OTEL_EXPORTER_OTLP_*).",
        ),
    ] = None,
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
    sinks: list[StepSink] = [_Progress(progress, len(loaded.requests))]
    exporter = exporter_from_env(otel)
    spans = None
    if exporter is not None:
        spans = StepSpans(make_tracer_provider(make_span_exporter(exporter)), loaded)
        sinks.append(spans)
    try:
        with progress:
            summary = record_workload(
                loaded,
                TapeModelRunner(tapes(loaded)),
                output,
                redactor=Redactor() if redact else None,
                sinks=sinks,
                flush_every_steps=flush_every,
            )
    finally:
        if spans is not None:
            spans.close()
    size_mb = output.stat().st_size / 1e6
    state = "complete" if summary.complete else "incomplete"
    console.print(
        f"recorded {summary.num_steps} steps of {len(loaded.requests)} requests "
        f"to {output} ({size_mb:.2f} MB, {state})",
        highlight=False,
    )


class _Progress:
    """Advances the progress bar as requests finish."""

    def __init__(self, progress: Progress, num_requests: int) -> None:
        self.progress = progress
        self.task = progress.add_task("record", total=num_requests, step=0)

    def on_step(self, record: StepRecord, scheduler: Scheduler) -> None:
        done = len(record.rejected) + len(record.aborted)
        if record.engine_step is not None:
            done += sum(1 for o in record.engine_step.outputs if o.finish_reason is not None)
        self.progress.update(self.task, advance=done, step=record.step)
