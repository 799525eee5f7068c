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
from stepscope.replay.diff_window import within_both
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
    with open_trace(a) as trace_a, open_trace(b) as trace_b:
        window, note = within_both(trace_a, trace_b, window, from_step_given=from_step is not None)
    result = diff_traces(a, b, ignore_block_ids=ignores_block_ids(ignore), window=window)
    verdict = judge(result, fail_on, parse_tolerances(tolerance or []))
    if note is not None:
        note += " (--from-step to choose)"
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
