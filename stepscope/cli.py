"""The `stepscope` command line: one command per module in `commands/`."""

from __future__ import annotations

from typing import Annotated

import duckdb
import typer
from rich.console import Console
from rich.markup import escape

from stepscope import __version__
from stepscope.engine import InputError
from stepscope.safe_text import safe_text
from stepscope.schema import TraceError
from stepscope.tracer.export import ExportError
from stepscope.tracer.writer import TraceWriteError

from .closed_pipe import closed_pipe_safe_stdout
from .command_help import command_help
from .commands.check import check
from .commands.demo import demo
from .commands.diff import diff
from .commands.doctor import doctor
from .commands.export import export
from .commands.info import info
from .commands.prune import prune
from .commands.record import record
from .commands.replay import replay
from .commands.run import run
from .commands.snapshot import snapshot
from .commands.sql import sql
from .commands.sweep import sweep
from .commands.tui import tui

app = typer.Typer(
    name="stepscope",
    help="Record, replay and diff a vLLM-style LLM-serving scheduler, step by step.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(*, value: bool) -> None:
    if value:
        typer.echo(f"stepscope {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    *,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Record, replay and diff a vLLM-style LLM-serving scheduler, step by step."""


for command in (
    run,
    record,
    info,
    sql,
    doctor,
    replay,
    diff,
    check,
    tui,
    export,
    snapshot,
    prune,
    sweep,
    demo,
):
    app.command(help=command_help(command))(command)


def main() -> None:
    """Console entry point: bad input is one line on stderr and exit code 2."""
    try:
        with closed_pipe_safe_stdout():
            app(prog_name="stepscope")
    except (InputError, TraceError, TraceWriteError, ExportError, duckdb.Error) as error:
        message = escape(safe_text(str(error).strip().split("\n")[0]))
        Console(stderr=True).print(
            f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True
        )
        raise SystemExit(2) from None
