"""`stepscope replay`: re-run a trace's scheduling, exactly or under another config or scheduler."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from stepscope.engine import InputError
from stepscope.inputs import load_scheduler_class, parse_knob
from stepscope.replay.exact import replay_exact
from stepscope.replay.report import exact_to_json, print_exact, print_whatif
from stepscope.replay.verdict import FailOn, judge
from stepscope.replay.whatif import replay_whatif

from .options import KnobsOption


def replay(
    trace: Annotated[Path, typer.Argument(help="A recorded trace.")],
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
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Replay a trace with no model. Exact by default: every step is checked against the
    recording (exit 0 identical, 1 divergent). With --set or --scheduler it is a what-if:
    the run may take another course, and a summary against the original is printed."""
    if output is not None and output.exists():
        raise InputError(f"{output}: already exists (remove it or choose another -o)")
    scheduler_cls = load_scheduler_class(scheduler) if scheduler else None
    if knobs or scheduler_cls is not None:
        _what_if(trace, output, dict(parse_knob(k) for k in knobs or []), scheduler_cls, as_json)
        return
    result = replay_exact(trace, output)
    if as_json:
        typer.echo(json.dumps(exact_to_json(result)))
    else:
        print_exact(Console(), result)
    if result.divergence is not None:
        raise typer.Exit(1)


def _what_if(
    trace: Path,
    output: Path | None,
    knobs: dict[str, object],
    scheduler_cls: type | None,
    as_json: bool,
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        target = output or Path(scratch) / "what-if.duckdb"
        extra = {} if scheduler_cls is None else {"scheduler_cls": scheduler_cls}
        result = replay_whatif(trace, target, knobs, **extra)
        verdict = judge(result.diff, FailOn.METRICS, {})
        if as_json:
            typer.echo(json.dumps(_whatif_json(result), default=str))
        else:
            print_whatif(Console(), result, verdict, kept=output is not None)


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
        "seconds": result.seconds,
        "num_placeholder_tokens": result.num_placeholder_tokens,
    }
