"""`stepscope replay`: re-run a trace's scheduling, exactly or under another config or scheduler."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from stepscope.engine import InputError
from stepscope.inputs import load_scheduler_class, load_vllm_scheduler_class, parse_knob
from stepscope.output_paths import check_outputs, new_file
from stepscope.progress import StepProgress
from stepscope.replay.exact import replay_exact
from stepscope.replay.from_step import StepWindow
from stepscope.replay.report import (
    diff_to_json,
    exact_to_json,
    print_exact,
    print_vllm_replay,
    print_whatif,
)
from stepscope.replay.verdict import FailOn, judge
from stepscope.replay.vllm_replay import replay_with_vllm, require_vllm
from stepscope.replay.whatif import replay_whatif
from stepscope.safe_text import safe_text
from stepscope.schema import open_trace
from stepscope.schema.trace import check_readable
from stepscope.stop_signals import stops_like_ctrl_c

from .options import (
    Engine,
    EngineOption,
    FromStepOption,
    KnobsOption,
    SchedulerClsOption,
    ToStepOption,
    step_window,
)

VLLM_WINDOW_REFUSAL = (
    "--engine vllm with --from-step/--to-step: vLLM's Scheduler is not restored to a "
    "checkpoint (its block pool's free list, its managers' block tables and each "
    "Request's progress are private state, laid out differently by each vLLM version); "
    "replay it from step 0, or through stepscope's engine"
)


@stops_like_ctrl_c
def replay(
    trace: Annotated[Path, typer.Argument(help="A recorded trace: a file or a recording folder.")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Also write the replay as a trace here.")
    ] = None,
    knobs: KnobsOption = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler", metavar="module:Class", help="A Scheduler subclass to replay with."
        ),
    ] = None,
    engine: EngineOption = Engine.STEPSCOPE,
    scheduler_cls: SchedulerClsOption = None,
    from_step: FromStepOption = None,
    to_step: ToStepOption = None,
    *,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Replay a trace with no model. Exact by default: every step is checked against the
    recording. With --set or --scheduler it is a what-if: the run may take another course,
    and a summary against the original is printed. With --engine vllm the trace drives
    vLLM's own scheduler and the result is diffed against it.

    Exit codes (any of them: 2 on bad input):
    - exact: 0 every step identical, 1 a step diverged;
    - what-if: 0 no metric got worse, 1 one did (the FAIL line names it);
    - with --engine vllm: 0 identical decisions (with --set: no metric worse), 1 not.

    --from-step S [--to-step E] replays steps S to E only, starting from the trace's
    nearest checkpoint at or before S (`stepscope info` lists them)."""
    check_outputs([new_file("-o", output)], [trace])
    window = step_window(from_step, to_step)
    if engine is Engine.VLLM and not window.whole:
        raise InputError(VLLM_WINDOW_REFUSAL)
    if engine is Engine.VLLM:
        if scheduler:
            raise InputError("--scheduler takes a stepscope Scheduler; with --engine vllm use "
                             "--scheduler-cls")  # fmt: skip
        check_readable(trace)
        _replay_with_vllm(trace, output, knobs, scheduler_cls, as_json=as_json)
        return
    if scheduler_cls:
        raise InputError("--scheduler-cls needs --engine vllm")
    num_steps = _warn_outside_subset(trace, read_all=window.whole)
    scheduler_class = load_scheduler_class(scheduler) if scheduler else None
    if knobs or scheduler_class is not None:
        changed = dict(parse_knob(k) for k in knobs or [])
        _what_if(
            trace, output, changed, scheduler_class, as_json=as_json, num_steps=num_steps,
            window=window,
        )  # fmt: skip
        return
    with StepProgress() as progress:
        progress.start(f"replay {trace.name}", num_steps)
        result = replay_exact(trace, output, sinks=[progress], window=window)
    if as_json:
        typer.echo(json.dumps(exact_to_json(result)))
    else:
        print_exact(Console(), result)
    if result.divergence is not None:
        raise typer.Exit(1)


def _warn_outside_subset(trace: Path, *, read_all: bool) -> int:
    """A vLLM trace that used features this engine leaves out cannot be expected to match.

    A whole replay reads the whole trace first: a damaged block is an error, never a
    missed difference (a windowed one reads its own rows only, and a damaged one among
    them is an error as it is read). Returns the trace's number of steps, for the progress
    line.
    """
    with open_trace(trace) as opened:
        if read_all:
            opened.read_all()
        reasons = escape(safe_text(opened.meta.get("outside_subset", "")))
        num_steps = opened.num_steps
    if reasons:
        Console(stderr=True).print(
            f"[yellow]warning:[/] {escape(safe_text(str(trace)))} was recorded from vLLM with "
            "features stepscope's "
            f"engine does not model ({reasons}); --engine vllm replays it exactly",
            highlight=False,
        )
    return num_steps


def _replay_with_vllm(
    trace: Path,
    output: Path | None,
    knobs: list[str] | None,
    scheduler_cls: str | None,
    *,
    as_json: bool,
) -> None:
    require_vllm()
    cls = load_vllm_scheduler_class(scheduler_cls) if scheduler_cls else None
    changed = dict(parse_knob(k) for k in knobs or [])
    result = replay_with_vllm(trace, output, cls, changed or None)
    verdict = judge(result.diff, FailOn.METRICS if changed else FailOn.DECISIONS, {})
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "engine": "vllm",
                    "scheduler_class": result.scheduler_class,
                    "num_padded_tokens": result.num_padded_tokens,
                    "diff": diff_to_json(result.diff, verdict),
                },
                default=str,
            )
        )
    else:
        print_vllm_replay(Console(), result, verdict)
    if verdict.failed:
        raise typer.Exit(1)


def _what_if(
    trace: Path,
    output: Path | None,
    knobs: dict[str, object],
    scheduler_cls: type | None,
    *,
    as_json: bool,
    num_steps: int,
    window: StepWindow,
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        target = output or Path(scratch) / "what-if.duckdb"
        extra: dict[str, Any] = {} if scheduler_cls is None else {"scheduler_cls": scheduler_cls}
        with StepProgress() as progress:
            progress.start(f"what-if {trace.name}", num_steps)
            result = replay_whatif(trace, target, knobs, sinks=[progress], window=window, **extra)
        verdict = judge(result.diff, FailOn.METRICS, {})
        if as_json:
            typer.echo(json.dumps(_whatif_json(result), default=str))
        else:
            print_whatif(Console(), result, verdict, kept=output is not None)
    if verdict.failed:
        raise typer.Exit(1)


def _whatif_json(result: object) -> dict[str, object]:
    from stepscope.replay.report import diff_to_json
    from stepscope.replay.whatif import WhatIfReplay

    assert isinstance(result, WhatIfReplay)
    return {
        "original": str(result.original),
        "output": str(result.output),
        "knobs": result.knobs,
        "scheduler": result.scheduler,
        "diff": diff_to_json(result.diff, judge(result.diff, FailOn.METRICS, {})),
        "cost_model": None if result.cost_model is None else result.cost_model.describe(),
        "cost_model_problem": None if result.cost_model is None else result.cost_model.problem,
        "seconds": result.seconds,
        "num_placeholder_tokens": result.num_placeholder_tokens,
    }
