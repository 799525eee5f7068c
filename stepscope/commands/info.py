"""`stepscope info`: what a trace holds, at a glance."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from stepscope.engine import InputError
from stepscope.replay.checkpoints import checkpoint_steps
from stepscope.safe_text import safe_text
from stepscope.schema import Trace, open_trace
from stepscope.schema.knob_text import kv_cache_groups_text
from stepscope.schema.recording_layout import folder_bytes
from stepscope.schema.set_members import Member, find_members, find_trace, is_trace_set
from stepscope.schema.step_gaps import FELL_BEHIND

from .info_recording import print_recording, recording_report, writer_line
from .info_set import print_set, set_report
from .options import ReadFromStepOption, ReadToStepOption, TraceNameOption, step_window

_META_SHOWN = (
    "engine",
    "emulates_vllm",
    "vllm_version",
    "scheduler_class",
    "model",
    "device",
    "created_at",
    "workload",
    "redacted",
    "outside_subset",
)


def info(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="TRACE",
            help="A trace file, a recording folder, or a folder of traces (choose one with "
            "--trace).",
        ),
    ],
    name: TraceNameOption = None,
    from_step: ReadFromStepOption = None,
    to_step: ReadToStepOption = None,
    *,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Read every block of the file first, as replay and diff do: a damaged one "
            "is an error (exit 2). Without it only what is shown is read.",
        ),
    ] = False,
) -> None:
    """Show a trace's config, steps, requests, preemptions, outcomes, and whether it is complete.

    Of a recording folder, also whether a process records into it now, its settings, its
    segments and any steps it did not record. Of a folder of traces (a server's /traces/),
    one line per trace: its kind, state, steps, size and when it was made; --trace NAME
    shows one. DuckDB finds a damaged block only when it
    reads it: without --check the file's blocks are not all read, and the output says so
    ("blocks not checked").

    --from-step/--to-step summarize a window of steps: the counts, steps and checkpoints
    are the window's (its requests: those its steps name); the state and the recording's
    segments stay the whole trace's."""
    window = step_window(from_step, to_step)
    members = set_listed(path, name)
    if members is not None and not window.whole:
        raise InputError(
            f"--from-step/--to-step: {path} is a folder of {len(members)} traces; choose "
            "one with --trace NAME to summarize a window of it"
        )
    if members is not None:
        listed = set_report(path, members)
        if as_json:
            typer.echo(json.dumps(listed, default=str))
        else:
            print_set(Console(), listed)
        return
    trace = find_trace(path, name)
    with open_trace(trace, window) as opened:
        if check:
            opened.read_all()
        summary_relation = opened.view("summary")
        summary = dict(zip(summary_relation.columns, summary_relation.fetchall()[0], strict=True))
        wal = _wal_bytes(trace) if opened.recording is None else 0
        report = {
            "path": str(trace),
            "size_bytes": _size_bytes(opened) + wal,
            "wal_bytes": wal,
            "complete": opened.complete,
            "dropped_from": opened.dropped_from,
            "first_step": opened.first_step,
            "last_step": opened.last_step,
            "window": None
            if window.whole
            else {"from_step": opened.first_step, "to_step": opened.last_step},
            "trace_steps": list(opened.held),
            "gaps": [
                {"first_step": gap.first_step, "last_step": gap.last_step, "why": gap.why}
                for gap in opened.gaps
            ],
            "recording": None if opened.recording is None else recording_report(opened),
            "blocks_checked": check,
            "schema_version": opened.schema_version,
            "meta": opened.meta,
            "config": opened.config,
            "summary": summary,
            "checkpoints": checkpoint_steps(opened),
        }
    if as_json:
        typer.echo(json.dumps(report, default=str))
        return
    _print_report(Console(), report)


def set_listed(path: Path, name: str | None) -> tuple[Member, ...] | None:
    """The traces of a folder of several to list (None: one trace to show)."""
    if name is not None or not is_trace_set(path):
        return None
    members = find_members([path])
    return members if len(members) > 1 else None


def _size_bytes(trace: Trace) -> int:
    """The file's bytes, or those of every file in the recording's folder."""
    if trace.recording is None:
        return trace.path.stat().st_size
    return folder_bytes(trace.recording.folder)


def _wal_bytes(trace: Path) -> int:
    """The size of the trace's write-ahead log: steps not yet folded into the file itself."""
    wal = trace.with_name(trace.name + ".wal")
    return wal.stat().st_size if wal.is_file() else 0


def _config_items(config: dict[str, Any]) -> dict[str, Any]:
    """The knobs set, hybrid KV cache groups as `type:window` in group order."""
    items = {k: v for k, v in config.items() if v is not None}
    groups = items.pop("kv_cache_groups", None)
    retention = items.pop("prefix_cache_retention_interval", None)
    if groups is not None:
        items["kv_cache_groups"] = kv_cache_groups_text(groups)
        items["prefix_cache_retention_interval"] = retention
    return items


def _print_report(console: Console, report: dict[str, Any]) -> None:
    meta, summary = report["meta"], report["summary"]
    state = _state(report)
    blocks = (
        "every block read"
        if report["blocks_checked"]
        else "blocks not checked (--check reads them)"
    )
    path = _safe(report["path"])
    kind = "" if report["recording"] is None else f"recording folder, {writer_line(report)}  "
    console.print(
        f"[bold]{path}[/]  {report['size_bytes'] / 1e6:.2f} MB  {kind}{state}  [dim]{blocks}[/]"
    )
    if report["wal_bytes"]:
        console.print(
            f"[yellow]{report['wal_bytes'] / 1e6:.2f} MB of it in {path}.wal[/], "
            "steps not yet folded into the file: copy both files",
            highlight=False,
        )
    console.print(
        "  ".join(f"{key} [cyan]{_safe(meta[key])}[/]" for key in _META_SHOWN if meta.get(key)),
        highlight=False,
    )
    items = _config_items(report["config"])
    console.print(
        safe_text("config  " + "  ".join(f"{k}={v}" for k, v in items.items())), markup=False
    )
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    reasons = summary.pop("finish_reasons") or {}
    for key, value in summary.items():
        table.add_row(key.replace("_", " "), Text("" if value is None else safe_text(str(value))))
    finish = ", ".join(f"{n} {reason}" for reason, n in reasons.items())
    table.add_row("finish reasons", Text(safe_text(finish)))
    table.add_row("checkpoints", Text(_checkpoints_line(report)))
    if report["recording"] or report["first_step"] or report["gaps"] or report["window"]:
        table.add_row("steps", Text(_steps_line(report)))
    console.print(table)
    if report["recording"] is not None:
        print_recording(console, report)


def _state(report: dict[str, Any]) -> str:
    """Whether the trace holds its run to the end, as rich markup."""
    if report["complete"]:
        return "[green]complete[/]"
    if report["dropped_from"] is not None:
        return f"[bold yellow]no steps from {report['dropped_from']} on[/] (dropped)"
    recording = report["recording"]
    if recording is not None and recording["writer"] == "recording":
        return "not complete yet"
    return "[bold red]INCOMPLETE[/] (recording stopped early)"


def _steps_line(report: dict[str, Any]) -> str:
    """The steps held, and those missing between them and at the end (with why)."""
    line = f"{report['first_step']}..{report['last_step']}"
    if report["window"] is not None:
        first, last = report["trace_steps"]
        line += f" of {first}..{last} (the window read)"
    for gap in report["gaps"]:
        line += f"; not {gap['first_step']}..{gap['last_step']} ({gap['why']})"
    if report["dropped_from"] is not None:
        line += f"; none from {report['dropped_from']} on ({FELL_BEHIND})"
    return line


def _checkpoints_line(report: dict[str, Any]) -> str:
    """The checkpoints in one line: how many, at which steps (a regular run of them as its
    first, last and interval), or why there are none."""
    steps: list[int] = report["checkpoints"]
    if not steps:
        version = report["schema_version"]
        return "none" if version >= 6 else f"none (schema {version}: from step 0 only)"
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    if len(steps) > 4 and len(gaps) == 1:
        return f"{len(steps)}: steps {steps[0]}, {steps[1]}, …, {steps[-1]} (every {gaps.pop()})"
    shown = ", ".join(map(str, steps[:8])) + (", …" if len(steps) > 8 else "")
    return f"{len(steps)}: steps {shown}"


def _safe(value: object) -> str:
    """A trace's string, escaped for the terminal and for rich's markup."""
    return escape(safe_text(str(value)))
