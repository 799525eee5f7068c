"""The `stepscope` command line."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from stepscope.engine import EngineLoop, InputError, TapeModelRunner, Workload, load_workload
from stepscope.engine.decision_log import decision_lines
from stepscope.schema import TraceError
from stepscope.tracer.writer import TraceWriteError

from . import run_view
from .commands.demo import demo
from .commands.info import info
from .commands.record import record
from .commands.sql import sql
from .commands.tui import tui

app = typer.Typer(
    name="stepscope",
    help="Record, replay and diff a vLLM-style LLM-serving scheduler, step by step.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEFAULT_WORKLOAD = "default.json"


@app.callback()
def _root() -> None:
    """Record, replay and diff a vLLM-style LLM-serving scheduler, step by step."""


SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KNOB=VALUE",
        help="Override an engine knob, e.g. --set max_num_batched_tokens=4096 (repeatable).",
    ),
]


@app.command()
def run(
    workload: Annotated[
        Path | None,
        typer.Argument(help="Workload JSON (conformance format). Default: the bundled example."),
    ] = None,
    jsonl: Annotated[
        bool,
        typer.Option("--jsonl", help="One JSON object per step, in the vLLM oracle's format."),
    ] = False,
    knobs: SetOption = None,
) -> None:
    """Run a workload through the engine and show each step's scheduling decisions."""
    loaded = _with_knobs(_load(workload), knobs or [])
    loop = EngineLoop(loaded, TapeModelRunner(_tapes(loaded)))
    if jsonl:
        for line in decision_lines(loop):
            sys.stdout.write(json.dumps(line) + "\n")
        return
    console = Console()
    title = f"{loaded.source}  ({_config_line(loaded)})"
    table = run_view.new_step_table(title)
    summary = run_view.RunSummary()
    for step_record in loop.run():
        run_view.add_step_row(table, step_record, loop, loaded.config.token_budget)
        summary.add(step_record)
    console.print(table)
    run_view.print_summary(console, summary, loop)


def _load(path: Path | None) -> Workload:
    if path is not None:
        return load_workload(path)
    bundled = resources.files("stepscope").joinpath("workloads", DEFAULT_WORKLOAD)
    with resources.as_file(bundled) as bundled_path:
        return load_workload(bundled_path)


def _tapes(workload: Workload) -> dict[str, tuple[int, ...]]:
    return {spec.request_id: spec.output_token_ids for spec in workload.requests}


def _with_knobs(workload: Workload, assignments: list[str]) -> Workload:
    if not assignments:
        return workload
    knobs = dict(parse_knob(text) for text in assignments)
    return workload.with_config(workload.config.with_knobs(knobs))


def parse_knob(text: str) -> tuple[str, Any]:
    """`name=value`, the value read as JSON when it parses (4096, true, 0.1), else a string."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise InputError(f"--set {text!r}: expected KNOB=VALUE")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name.strip(), value


def _config_line(workload: Workload) -> str:
    config = workload.config
    return (
        f"bs {config.block_size}, {config.num_blocks} blocks, budget {config.token_budget}, "
        f"max_num_seqs {config.max_num_seqs}, {config.policy.value}, "
        f"prefix caching {'on' if config.enable_prefix_caching else 'off'}, "
        f"chunked prefill {'on' if config.enable_chunked_prefill else 'off'}"
    )


app.command()(record)
app.command()(info)
app.command()(sql)
app.command()(tui)
app.command()(demo)


def main() -> None:
    """Console entry point: bad input is one line on stderr and exit code 2."""
    try:
        app()
    except (InputError, TraceError, TraceWriteError) as error:
        Console(stderr=True).print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
        raise SystemExit(2) from None
    except BrokenPipeError:
        sys.stderr.close()
        raise SystemExit(1) from None
