"""The options only `stepscope record` takes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stepscope.engine.model_runner_choice import DTYPES
from stepscope.tracer.checkpointer import DEFAULT_CHECKPOINT_EVERY

WorkloadArgument = Annotated[
    Path | None,
    typer.Argument(help="Workload (.json or .toml). Default: the bundled example."),
]
FromTraceOption = Annotated[
    Path | None,
    typer.Option(
        "--from",
        metavar="TRACE",
        help="Run a trace's arrivals again (its config, requests, aborts), e.g. live with a "
        "model on another device; diff the result with the trace.",
    ),
]
RecordDtypeOption = Annotated[
    str | None,
    typer.Option(
        "--dtype",
        help=f"For a real model: {'|'.join(DTYPES)} (default float32). With --engine "
        "vllm-live: any dtype vLLM takes (default: the trace's, else the model's).",
    ),
]
OutputOption = Annotated[
    Path, typer.Option("-o", "--output", help="The trace file to write (must not exist).")
]
RedactOption = Annotated[
    bool,
    typer.Option(
        "--redact",
        help="Store keyed pseudonyms instead of token ids (equality survives; replay works).",
    ),
]
FlushEveryOption = Annotated[
    int,
    typer.Option(
        "--flush-every",
        min=1,
        help="Most steps per write to the file (a write also comes every 131,072 "
        "scheduled rows or 5 seconds).",
    ),
]
CheckpointEveryOption = Annotated[
    int | None,
    typer.Option(
        "--checkpoint-every",
        min=0,
        metavar="STEPS",
        help=f"Write the scheduler's state every STEPS steps, so replay --from-step can start "
        f"anywhere (default {DEFAULT_CHECKPOINT_EVERY}; 0: none; a redacted trace takes none).",
    ),
]
SegmentOption = Annotated[
    str | None,
    typer.Option(
        "--segment",
        metavar="STEPS|TIME",
        help="Record into a folder of segments (-o names the folder), one closed every "
        "STEPS steps (5000steps) or TIME (60s, 10m), each opening with a checkpoint so it "
        "replays on its own; readable while it is written.",
    ),
]
RetainOption = Annotated[
    str | None,
    typer.Option(
        "--retain",
        metavar="SIZE,AGE",
        help="With --segment: delete the oldest closed segments past SIZE (2GB) or AGE "
        "(24h), or both (2GB,24h). Default: keep them all.",
    ),
]
KeepOption = Annotated[
    str | None,
    typer.Option(
        "--keep",
        metavar="CONDITION",
        help="With --segment: spare from --retain every closed segment with a step where "
        "CONDITION holds, SQL over a step's columns ('num_preemptions > 0').",
    ),
]
KeepMaxOption = Annotated[
    str | None,
    typer.Option(
        "--keep-max",
        metavar="SIZE",
        help="With --keep: the most the kept segments take (the oldest go past it). "
        "Default: --retain's size.",
    ),
]
OtelOption = Annotated[
    str | None,
    typer.Option(
        "--otel",
        metavar="console|otlp",
        help="Also export OpenTelemetry spans (default: OTEL_TRACES_EXPORTER; otlp reads "
        "OTEL_EXPORTER_OTLP_*).",
    ),
]
