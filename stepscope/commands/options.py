"""Options shared by several commands."""

from __future__ import annotations

import enum
from typing import Annotated

import typer

from stepscope.engine import InputError
from stepscope.engine.model.config import PRESETS
from stepscope.engine.model_runner_choice import DEVICES, DTYPES, TAPE
from stepscope.replay.from_step import StepWindow

KnobsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KNOB=VALUE",
        help="Override an engine knob, e.g. --set max_num_batched_tokens=4096 (repeatable).",
    ),
]

ModelOption = Annotated[
    str,
    typer.Option(
        "--model",
        metavar="tape|PRESET|PATH",
        help=f"{TAPE}: the workload's scripted outputs; a seeded preset "
        f"({', '.join(PRESETS)}); or a local directory with a Llama config.json and "
        "*.safetensors.",
    ),
]
DeviceOption = Annotated[
    str, typer.Option("--device", help=f"For a real model: {'|'.join(DEVICES)}.")
]
DtypeOption = Annotated[str, typer.Option("--dtype", help=f"For a real model: {'|'.join(DTYPES)}.")]


class Engine(enum.StrEnum):
    STEPSCOPE = "stepscope"
    VLLM = "vllm"


EngineOption = Annotated[
    Engine,
    typer.Option(
        "--engine",
        help="stepscope: this tool's engine. vllm: the installed vLLM's own scheduler "
        "(0.32.x or 0.33.0), recorded (needs stepscope\\[vllm]).",
    ),
]


class RecordEngine(enum.StrEnum):
    STEPSCOPE = "stepscope"
    VLLM = "vllm"
    VLLM_LIVE = "vllm-live"


RecordEngineOption = Annotated[
    RecordEngine,
    typer.Option(
        "--engine",
        help="stepscope: this tool's engine. vllm: the installed vLLM's own scheduler "
        "(0.32.x or 0.33.0), recorded (needs stepscope\\[vllm]). vllm-live: a real vLLM engine "
        "with a model (--model DIR, or the trace's with --from), stepped in this process.",
    ),
]
EngineArgsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--engine-arg",
        metavar="KEY=VALUE",
        help="With --engine vllm-live: one of vLLM's EngineArgs (value as JSON), e.g. "
        "--engine-arg enforce_eager=true (repeatable).",
    ),
]
SchedulerClsOption = Annotated[
    str | None,
    typer.Option(
        "--scheduler-cls",
        metavar="module.Class",
        help="With --engine vllm: a vLLM scheduler class, as vLLM's --scheduler-cls takes it.",
    ),
]

TraceNameOption = Annotated[
    str | None,
    typer.Option(
        "--trace",
        metavar="NAME",
        help="The trace of the folder to read, by name: its file name without .duckdb "
        "(see `stepscope sql FOLDER`).",
    ),
]

ForceOption = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Replace an output file that exists (never a trace, never one of the inputs).",
    ),
]
FromStepOption = Annotated[
    int | None,
    typer.Option(
        "--from-step",
        metavar="STEP",
        help="Start at STEP: from the trace's nearest checkpoint at or before it, run "
        "silently to it, then check (or, with --set, change) every step from there.",
    ),
]
ToStepOption = Annotated[
    int | None,
    typer.Option("--to-step", metavar="STEP", help="Stop after STEP (default: the end)."),
]


ReadFromStepOption = Annotated[
    int | None,
    typer.Option(
        "--from-step",
        metavar="STEP",
        help="Read the steps from STEP on only: every table and view holds their rows, "
        "and the requests they name.",
    ),
]
ReadToStepOption = Annotated[
    int | None,
    typer.Option("--to-step", metavar="STEP", help="Read up to STEP only (default: the last)."),
]


def step_window(from_step: int | None, to_step: int | None) -> StepWindow:
    """The window `--from-step` / `--to-step` name, checked against each other."""
    if from_step is not None and from_step < 0:
        raise InputError(f"--from-step {from_step}: a step is 0 or more")
    if to_step is not None and to_step < (from_step or 0):
        raise InputError(f"--to-step {to_step}: it is before --from-step {from_step or 0}")
    return StepWindow(from_step or 0, to_step)
