"""`stepscope diff`: compare two traces step by step, for people and for CI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from stepscope.engine import InputError
from stepscope.output_paths import check_outputs, claims_stdout, write_text
from stepscope.replay.diff import diff_traces
from stepscope.replay.from_step import StepWindow
from stepscope.replay.report import diff_to_json, diff_to_markdown, diffs_to_junit, print_diff
from stepscope.replay.verdict import FailOn, judge, parse_tolerances
from stepscope.safe_text import safe_text
from stepscope.schema import open_trace
from stepscope.schema.trace import check_readable
from stepscope.stop_signals import stops_like_ctrl_c

from .options import ForceOption, FromStepOption, ToStepOption, step_window
from .report_options import AppendOption, JunitOption, MarkdownOption, report_outputs

IgnoreOption = Annotated[
    list[str] | None,
    typer.Option("--ignore", metavar="block_ids", help="Leave a field out of the comparison."),
]
FailOnOption = Annotated[
    FailOn,
    typer.Option(
        "--fail-on",
        help="Exit 1 on any decision change, or only when a metric gets worse than its tolerance.",
    ),
]
ToleranceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tolerance",
        metavar="METRIC=AMOUNT[%]",
        help="With --fail-on metrics: how much worse a metric may get (default 0).",
    ),
]


def ignores_block_ids(ignore: list[str] | None) -> bool:
    """Whether `--ignore` leaves block ids out (the one field that can be left out)."""
    ignored = set(ignore or [])
    if ignored - {"block_ids"}:
        raise InputError(f"--ignore {sorted(ignored - {'block_ids'})[0]!r}: only block_ids")
    return "block_ids" in ignored


@stops_like_ctrl_c
def diff(
    a: Annotated[Path, typer.Argument(help="The baseline trace (a file or a recording folder).")],
    b: Annotated[Path, typer.Argument(help="The trace to compare with it (the same).")],
    ignore: IgnoreOption = None,
    *,
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON.")] = False,
    junit: JunitOption = None,
    markdown: MarkdownOption = None,
    append: AppendOption = False,
    force: ForceOption = False,
    fail_on: FailOnOption = FailOn.DECISIONS,
    tolerance: ToleranceOption = None,
    from_step: FromStepOption = None,
    to_step: ToStepOption = None,
) -> None:
    """Compare two traces: configs, the first divergent step and its cause, requests, metrics.

    With --from-step/--to-step, over those steps only (the figures too: of those steps, and
    of the requests arriving in them). Without --from-step, from the later of the two
    traces' first steps (a recording whose oldest segments were deleted starts past 0).
    Exit 0 when they pass (--fail-on), 1 when they do not, 2 on bad input. A report never
    replaces a trace or an input, and another file only with --force."""
    window = step_window(from_step, to_step)
    junit_out, markdown_out = report_outputs(junit, markdown, append=append)
    check_outputs(
        [junit_out, markdown_out],
        [a, b],
        force=force,
        stdout_taken_by=["--json"] if as_json else [],
    )
    for trace in (a, b):
        check_readable(trace)
    window, note = within_both(a, b, window, from_step_given=from_step is not None)
    result = diff_traces(a, b, ignore_block_ids=ignores_block_ids(ignore), window=window)
    verdict = judge(result, fail_on, parse_tolerances(tolerance or []))
    if note is not None:
        Console(stderr=True).print(safe_text(note), highlight=False, markup=False)
    if junit_out is not None:
        write_text(junit_out, diffs_to_junit([(f"{a.name} vs {b.name}", result, verdict)]))
    if markdown_out is not None:
        write_text(markdown_out, diff_to_markdown(result, verdict))
    if as_json:
        typer.echo(json.dumps(diff_to_json(result, verdict), default=str))
    else:
        print_diff(Console(stderr=claims_stdout([junit_out, markdown_out])), result, verdict)
    if verdict.failed:
        raise typer.Exit(1)


def within_both(
    a: Path, b: Path, window: StepWindow, *, from_step_given: bool
) -> tuple[StepWindow, str | None]:
    """`window` within the steps both traces can hold (a recording whose oldest segments
    were deleted starts past 0, as does a replay's from a step). Without `--from-step` it
    starts at the later of their first steps, with a line saying so (None: both start at
    0); a `--from-step` or `--to-step` before that step, or two traces that hold no step in
    common (a snapshot taken before retention deleted the steps a recording now starts
    after), is an error naming what each holds."""
    held = {}
    for path in (a, b):
        with open_trace(path) as trace:
            held[path] = (trace.first_step, trace.last_step)
    (a_first, a_last), (b_first, b_last) = held[a], held[b]
    if a_first <= a_last and b_first <= b_last and max(a_first, b_first) > min(a_last, b_last):
        raise InputError(
            f"{a} holds steps {a_first}..{a_last} and {b} steps {b_first}..{b_last}: "
            "no step is in both, so there is nothing to compare"
        )
    later = max(held, key=lambda path: held[path][0])
    first, last = held[later]
    for option, step in (("--from-step", window.from_step if from_step_given else None),
                         ("--to-step", window.to_step)):  # fmt: skip
        if step is not None and step < first:
            raise InputError(f"{option} {step}: {later} holds steps {first}..{last}")
    if from_step_given or first == 0:
        return window, None
    note = f"{later} holds steps from {first}: compared from step {first} (--from-step to choose)"
    return StepWindow(first, window.to_step), note
