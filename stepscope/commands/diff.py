"""`stepscope diff`: compare two traces step by step, for people and for CI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from stepscope.engine import InputError
from stepscope.replay.diff import diff_traces
from stepscope.replay.report import diff_to_json, diff_to_markdown, diffs_to_junit, print_diff
from stepscope.replay.verdict import FailOn, judge, parse_tolerances
from stepscope.report_files import check_report_path, write_report
from stepscope.schema.trace import check_readable
from stepscope.stop_signals import stops_like_ctrl_c

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
    a: Annotated[Path, typer.Argument(help="The baseline trace.")],
    b: Annotated[Path, typer.Argument(help="The trace to compare with it.")],
    ignore: IgnoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON.")] = False,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write a JUnit XML report.")] = None,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Write a Markdown report (CI job summary).")
    ] = None,
    fail_on: FailOnOption = FailOn.DECISIONS,
    tolerance: ToleranceOption = None,
) -> None:
    """Compare two traces: configs, the first divergent step and its cause, requests, metrics.

    Exit 0 when they pass (--fail-on), 1 when they do not, 2 on bad input."""
    check_report_path(junit, "--junit")
    check_report_path(markdown, "--markdown")
    for trace in (a, b):
        check_readable(trace)
    result = diff_traces(a, b, ignore_block_ids=ignores_block_ids(ignore))
    verdict = judge(result, fail_on, parse_tolerances(tolerance or []))
    if junit is not None:
        write_report(junit, diffs_to_junit([(f"{a.name} vs {b.name}", result, verdict)]), "--junit")
    if markdown is not None:
        write_report(markdown, diff_to_markdown(result, verdict), "--markdown")
    if as_json:
        typer.echo(json.dumps(diff_to_json(result, verdict), default=str))
    else:
        print_diff(Console(), result, verdict)
    if verdict.failed:
        raise typer.Exit(1)
