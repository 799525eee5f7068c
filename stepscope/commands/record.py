"""`stepscope record`: run a workload with the recorder on and write a trace."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from stepscope.engine import InputError, ModelRunner, Scheduler, StepRecord, Workload
from stepscope.engine.model_runner_choice import TAPE, create_model_runner
from stepscope.inputs import apply_knobs, load_vllm_scheduler_class, load_workload_arg
from stepscope.output_paths import check_outputs, new_file
from stepscope.replay.inputs import workload_from_trace
from stepscope.replay.vllm_replay import require_vllm
from stepscope.safe_text import safe_text
from stepscope.schema import open_trace
from stepscope.schema.recording_layout import folder_bytes, holds_a_step, scan
from stepscope.stop_signals import stop_reason, stops_like_ctrl_c
from stepscope.tracer.checkpointer import DEFAULT_CHECKPOINT_EVERY
from stepscope.tracer.otel import (
    StepSpans,
    exporter_from_env,
    make_span_exporter,
    make_tracer_provider,
)
from stepscope.tracer.record_workload import StepSink, record_workload
from stepscope.tracer.redact import Redactor
from stepscope.tracer.segments import (
    Retention,
    SegmentSettings,
    keep_rule,
    parse_retention,
    parse_segment_every,
)

from .options import (
    DeviceOption,
    EngineArgsOption,
    KnobsOption,
    ModelOption,
    RecordEngine,
    RecordEngineOption,
    SchedulerClsOption,
)
from .record_live import record_with_vllm_live
from .record_options import (
    CheckpointEveryOption,
    FlushEveryOption,
    FromTraceOption,
    KeepMaxOption,
    KeepOption,
    OtelOption,
    OutputOption,
    RecordDtypeOption,
    RedactOption,
    RetainOption,
    SegmentOption,
    WorkloadArgument,
)


@stops_like_ctrl_c
def record(
    workload: WorkloadArgument = None,
    from_trace: FromTraceOption = None,
    model: ModelOption = TAPE,
    device: DeviceOption = "auto",
    dtype: RecordDtypeOption = None,
    output: OutputOption = Path("trace.duckdb"),
    knobs: KnobsOption = None,
    *,
    redact: RedactOption = False,
    flush_every: FlushEveryOption = 256,
    checkpoint_every: CheckpointEveryOption = None,
    segment: SegmentOption = None,
    retain: RetainOption = None,
    keep: KeepOption = None,
    keep_max: KeepMaxOption = None,
    otel: OtelOption = None,
    engine: RecordEngineOption = RecordEngine.STEPSCOPE,
    scheduler_cls: SchedulerClsOption = None,
    engine_args: EngineArgsOption = None,
) -> None:
    """Run a workload and record every step into a DuckDB trace (or, with --segment, a
    folder of segments).

    Ctrl-C, SIGTERM and SIGHUP stop it cleanly: the steps so far are kept in a trace
    marked incomplete, one line says so, and the exit status is 130, 143 or 129."""
    segments = _segment_settings(segment, retain, keep, keep_max)
    what = "a DuckDB trace" if segments is None else "a recording folder"
    check_outputs([new_file("-o", output, what)], [workload, from_trace])
    loaded = apply_knobs(_workload(workload, from_trace), knobs or [])
    console = Console(stderr=True)
    _check_engine_options(engine, scheduler_cls, engine_args, otel, checkpoint_every)
    if segments is not None and engine is not RecordEngine.STEPSCOPE:
        raise InputError(
            "--segment needs --engine stepscope (a vLLM engine records segments with "
            "STEPSCOPE_TRACE_SEGMENT)"
        )
    if redact and checkpoint_every:
        raise InputError(
            "--checkpoint-every with --redact: a redacted trace holds no checkpoints (their "
            "block hashes are of the tokens it does not hold)"
        )
    try:
        if engine is RecordEngine.VLLM:
            _record_with_vllm(loaded, output, model, scheduler_cls, redact=redact, console=console)
        elif engine is RecordEngine.VLLM_LIVE:
            record_with_vllm_live(
                loaded,
                from_trace,
                output,
                model,
                device,
                dtype,
                engine_args or [],
                redact=redact,
                console=console,
            )
        else:
            dtype = dtype or "float32"
            runner = create_model_runner(model, loaded, device=device, dtype=dtype)
            meta = runner_meta(model, runner, dtype, from_trace)
            _record_with_stepscope(
                loaded,
                runner,
                output,
                meta,
                redact=redact,
                flush_every=flush_every,
                checkpoint_every=(
                    DEFAULT_CHECKPOINT_EVERY if checkpoint_every is None else checkpoint_every
                ),
                segments=segments,
                otel=otel,
                console=console,
            )
    except KeyboardInterrupt as stop:
        _print_kept(console, output, len(loaded.requests), stop)
        raise


def _segment_settings(
    segment: str | None, retain: str | None, keep: str | None, keep_max: str | None
) -> SegmentSettings | None:
    """`--segment`, `--retain`, `--keep` and `--keep-max` read, each a one-line error when
    malformed."""
    if keep_max is not None and keep is None:
        raise InputError("--keep-max needs --keep (it bounds the segments --keep spares)")
    if segment is None:
        for name, value in (("--retain", retain), ("--keep", keep)):
            if value is not None:
                raise InputError(f"{name} needs --segment (only a folder of segments is trimmed)")
        return None
    try:
        every = parse_segment_every(segment, "--segment")
        kept = Retention() if retain is None else parse_retention(retain, "--retain")
        rule = None if keep is None else keep_rule((keep, "--keep"), (keep_max, "--keep-max"), kept)
    except ValueError as error:
        raise InputError(str(error)) from None
    return SegmentSettings(every, kept, rule)


def _check_engine_options(
    engine: RecordEngine,
    scheduler_cls: str | None,
    engine_args: list[str] | None,
    otel: str | None,
    checkpoint_every: int | None,
) -> None:
    """Options that only one engine takes."""
    if checkpoint_every is not None and engine is not RecordEngine.STEPSCOPE:
        raise InputError(
            "--checkpoint-every needs --engine stepscope (recordings of vLLM's scheduler hold "
            "no checkpoints yet)"
        )
    if scheduler_cls and engine is not RecordEngine.VLLM:
        raise InputError("--scheduler-cls needs --engine vllm")
    if engine_args and engine is not RecordEngine.VLLM_LIVE:
        raise InputError("--engine-arg needs --engine vllm-live")
    if otel is not None and engine is not RecordEngine.STEPSCOPE:
        raise InputError("--otel needs --engine stepscope")


def _record_with_stepscope(
    workload: Workload,
    runner: ModelRunner,
    output: Path,
    meta: dict[str, str],
    *,
    redact: bool,
    flush_every: int,
    checkpoint_every: int,
    segments: SegmentSettings | None,
    otel: str | None,
    console: Console,
) -> None:
    """Record through stepscope's engine with a progress bar (and spans, when asked)."""
    progress = _progress_bar(console)
    sinks: list[StepSink] = [_Progress(progress, len(workload.requests))]
    spans = _step_spans(otel, workload)
    if spans is not None:
        sinks.append(spans)
    try:
        with progress:
            summary = record_workload(
                workload,
                runner,
                output,
                meta=meta,
                redactor=Redactor() if redact else None,
                sinks=sinks,
                flush_every_steps=flush_every,
                checkpoint_every=checkpoint_every,
                segments=segments,
            )
    finally:
        if spans is not None:
            spans.close()
    _print_summary(
        console, output, summary.num_steps, len(workload.requests), complete=summary.complete
    )


def _progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("[cyan]step {task.fields[step]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("requests done"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _step_spans(otel: str | None, workload: Workload) -> StepSpans | None:
    """OpenTelemetry spans of the steps, when `--otel` or the environment asks for them."""
    exporter = exporter_from_env(otel)
    if exporter is None:
        return None
    return StepSpans(make_tracer_provider(make_span_exporter(exporter)), workload)


def _record_with_vllm(
    workload: Workload,
    output: Path,
    model: str,
    scheduler_cls: str | None,
    *,
    redact: bool,
    console: Console,
) -> None:
    """The workload through vLLM's own scheduler, its scripted outputs standing in for a model."""
    if model != TAPE:
        raise InputError(f"--engine vllm runs the workload's scripted outputs; --model {model} "
                         "needs --engine stepscope")  # fmt: skip
    require_vllm()
    from stepscope.tracer.vllm.drive.driver import record_with_vllm

    cls = load_vllm_scheduler_class(scheduler_cls) if scheduler_cls else None
    redactor = Redactor() if redact else None
    run = record_with_vllm(workload, output, scheduler_cls=cls, redactor=redactor)
    with open_trace(output) as trace:
        num_steps = int(trace.meta.get("num_steps", "0"))
    _print_summary(console, output, num_steps, len(workload.requests), complete=run.complete)


def _print_summary(
    console: Console, output: Path, num_steps: int, num_requests: int, *, complete: bool
) -> None:
    size_mb = (folder_bytes(output) if output.is_dir() else output.stat().st_size) / 1e6
    state = "complete" if complete else "incomplete"
    console.print(
        safe_text(
            f"recorded {num_steps} steps of {num_requests} requests "
            f"to {output} ({size_mb:.2f} MB, {state})"
        ),
        highlight=False,
        markup=False,
    )
    trimmed = _retention_said(output, num_steps) if output.is_dir() else None
    if trimmed is not None:
        console.print(safe_text(trimmed), highlight=False, markup=False)


def _retention_said(folder: Path, num_steps: int) -> str | None:
    """What retention left of a recording that lost steps to it (None: it lost none)."""
    with open_trace(folder) as trace:
        num_kept, first, last = trace.num_steps, trace.first_step, trace.last_step
    if num_kept >= num_steps:
        return None
    if num_kept == 0:
        return f"retention deleted every segment: {folder} keeps no step"
    num_segments = len(scan(folder))
    return (
        f"retention deleted the oldest segments: {folder} keeps {num_kept} steps "
        f"({first}..{last}) in {num_segments} segment(s)"
    )


def _print_kept(console: Console, output: Path, num_requests: int, stop: KeyboardInterrupt) -> None:
    """After Ctrl-C or a stop signal: what the trace kept (it is closed by then)."""
    console.print(f"{stop_reason(stop)}: ", end="", highlight=False)
    if not output.exists() or (output.is_dir() and not holds_a_step(scan(output))):
        console.print("before the first step; nothing was recorded", highlight=False)
        return
    with open_trace(output) as trace:
        # The steps recorded, as a finished run says them: retention may have deleted some.
        num_steps = int(trace.meta.get("num_steps", trace.num_steps))
        complete = trace.complete
    _print_summary(console, output, num_steps, num_requests, complete=complete)


class _Progress:
    """Advances the progress bar as requests finish."""

    def __init__(self, progress: Progress, num_requests: int) -> None:
        self.progress = progress
        self.task = progress.add_task("record", total=num_requests, step=0)

    def on_step(self, record: StepRecord, scheduler: Scheduler) -> None:
        done = len(record.rejected) + len(record.aborted) + len(record.aborted_before_update)
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
