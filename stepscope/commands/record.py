"""`stepscope record`: run a workload with the recorder on and write a trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from stepscope.engine import InputError, ModelRunner, Scheduler, StepRecord, Workload
from stepscope.engine.model_runners import TAPE, create_model_runner
from stepscope.inputs import apply_knobs, load_workload_arg
from stepscope.replay.inputs import workload_from_trace
from stepscope.schema import open_trace
from stepscope.tracer.otel import (
    StepSpans,
    exporter_from_env,
    make_span_exporter,
    make_tracer_provider,
)
from stepscope.tracer.record import StepSink, record_workload
from stepscope.tracer.redact import Redactor

from .options import DeviceOption, DtypeOption, KnobsOption, ModelOption


def record(
    workload: Annotated[
        Path | None,
        typer.Argument(help="Workload (.json or .toml). Default: the bundled example."),
    ] = None,
    from_trace: Annotated[
        Path | None,
        typer.Option(
            "--from",
            metavar="TRACE",
            help="Run a trace's arrivals again (its config, requests, aborts), e.g. live with a "
            "model on another device; diff the result with the trace.",
        ),
    ] = None,
    model: ModelOption = TAPE,
    device: DeviceOption = "auto",
    dtype: DtypeOption = "float32",
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
    loaded = apply_knobs(_workload(workload, from_trace), knobs or [])
    runner = create_model_runner(model, loaded, device=device, dtype=dtype)
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
                runner,
                output,
                meta=runner_meta(model, runner, dtype, from_trace),
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


def _workload(path: Path | None, from_trace: Path | None) -> Workload:
    if from_trace is None:
        return load_workload_arg(path)
    if path is not None:
        raise InputError("give a workload or --from TRACE, not both")
    with open_trace(from_trace) as trace:
        return workload_from_trace(trace)


def runner_meta(
    model: str, runner: ModelRunner, dtype: str, from_trace: Path | None
) -> dict[str, str]:
    """What the trace's `_meta` says about how tokens were produced."""
    meta = {"model": model, "device": "cpu"}
    device = getattr(runner, "device", None)
    if device is not None:
        import torch

        meta.update(device=str(device), dtype=dtype, torch_version=torch.__version__)
    if from_trace is not None:
        meta["rerun_of"] = str(from_trace)
    return meta
