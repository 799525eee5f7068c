"""`stepscope doctor`: what is wrong with a trace's scheduling, the query that shows it, and
the knob change a what-if replay checked would cure it."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from stepscope.output_paths import check_outputs, claims_stdout, report, write_text
from stepscope.replay.doctor import Severity, diagnose, diagnosis_to_markdown, print_diagnosis
from stepscope.schema.set_members import find_trace

from .options import ToStepOption, TraceNameOption, step_window
from .report_options import MarkdownOption


class FailOnSeverity(enum.StrEnum):
    WARNING = "warning"
    CRITICAL = "critical"


def doctor(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="TRACE",
            help="A trace file, a recording folder, or a folder of traces (choose one with "
            "--trace).",
        ),
    ],
    name: TraceNameOption = None,
    *,
    from_step: Annotated[
        int | None,
        typer.Option(
            "--from-step",
            metavar="STEP",
            help="Examine steps from STEP on; the what-ifs start from the recorded state there "
            "(the trace's nearest checkpoint, then silently on).",
        ),
    ] = None,
    to_step: ToStepOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
    markdown: MarkdownOption = None,
    fail_on: Annotated[
        FailOnSeverity | None,
        typer.Option("--fail-on", help="Exit 1 if a finding is this severe or worse."),
    ] = None,
    no_what_if: Annotated[
        bool,
        typer.Option(
            "--no-what-if", help="Find and measure only: replay no candidate cure (fast)."
        ),
    ] = False,
) -> None:
    """Find what is wrong with a trace's scheduling, worst first: preemption thrash,
    head-of-line blocking, starvation, admission stalls, priority inversion, prefix-cache
    thrash, wasted drafts, LoRA-gate stalls, token budget left idle.

    Each finding says the steps and requests involved, what it cost, a `stepscope sql`
    command whose rows show it, and the smallest knob change among a few that a what-if
    replay over the same steps showed to cure it (--no-what-if: none tried). Exit 0, or 1
    with --fail-on when a finding is that severe; 2 on bad input. Writes nothing beside
    the trace: the what-ifs' traces go to a temporary folder."""
    window = step_window(from_step, to_step)
    markdown_out = report("--markdown", markdown)
    trace = find_trace(path, name)
    check_outputs([markdown_out], [trace], stdout_taken_by=["--json"] if as_json else [])
    diagnosis = diagnose(trace, path, window, what_ifs=not no_what_if)
    if markdown_out is not None:
        write_text(markdown_out, diagnosis_to_markdown(diagnosis))
    if as_json:
        typer.echo(json.dumps(diagnosis.to_json(), default=str))
    else:
        print_diagnosis(Console(stderr=claims_stdout([markdown_out])), diagnosis)
    if fail_on is not None:
        bar = Severity[fail_on.name]
        if any(finding.severity >= bar for finding in diagnosis.findings):
            raise typer.Exit(1)
