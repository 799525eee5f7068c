"""The CI reports `diff` and `check` write: JUnit XML and Markdown, to files or stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stepscope.engine import InputError
from stepscope.output_paths import Output, report

JunitOption = Annotated[
    Path | None,
    typer.Option(
        "--junit", metavar="FILE", help="Write a JUnit XML report to FILE (- prints it to stdout)."
    ),
]
MarkdownOption = Annotated[
    Path | None,
    typer.Option(
        "--markdown",
        metavar="FILE",
        help="Write a Markdown report, a CI job summary, to FILE (- prints it to stdout).",
    ),
]
AppendOption = Annotated[
    bool,
    typer.Option(
        "--append",
        help="Add the Markdown report to the end of the --markdown file (e.g. "
        "$GITHUB_STEP_SUMMARY) instead of replacing it.",
    ),
]


def report_outputs(
    junit: Path | None, markdown: Path | None, *, append: bool
) -> tuple[Output | None, Output | None]:
    """The JUnit and Markdown outputs asked for; `--append` goes with `--markdown`."""
    if append and markdown is None:
        raise InputError("--append adds to the --markdown file: give --markdown FILE")
    return report("--junit", junit), report("--markdown", markdown, append=append)
