"""`stepscope check`: replay baseline traces with the current scheduler and diff them, for CI."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from stepscope.baseline_names import distinct_names
from stepscope.engine import InputError, Scheduler
from stepscope.inputs import load_scheduler_class, parse_knob
from stepscope.progress import StepProgress
from stepscope.replay.diff import TraceDiff
from stepscope.replay.report import diff_to_markdown, diffs_to_junit, print_diff
from stepscope.replay.verdict import FailOn, Verdict, judge, parse_tolerances
from stepscope.replay.whatif import WhatIfReplay, replay_whatif
from stepscope.report_files import check_report_path, write_report
from stepscope.safe_text import safe_text
from stepscope.schema import open_trace

from .diff import FailOnOption, ToleranceOption
from .options import KnobsOption


def check(
    baselines: Annotated[
        list[Path], typer.Argument(help="Baseline traces, or folders holding them (*.duckdb).")
    ],
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", metavar="module:Class", help="The Scheduler to check."),
    ] = None,
    knobs: KnobsOption = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write a JUnit XML report.")] = None,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Write a Markdown report (CI job summary).")
    ] = None,
    fail_on: FailOnOption = FailOn.DECISIONS,
    tolerance: ToleranceOption = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Show each full diff.")] = False,
) -> None:
    """Replay each baseline's inputs through the current scheduler and diff it with the baseline.

    Exit 0 when every baseline passes (--fail-on), 1 when one does not, 2 on bad input."""
    check_report_path(junit, "--junit")
    check_report_path(markdown, "--markdown")
    traces = _traces(baselines)
    held = {trace: _steps_held(trace) for trace in traces}
    scheduler_cls = load_scheduler_class(scheduler) if scheduler else None
    knob_values = dict(parse_knob(k) for k in knobs or [])
    tolerances = parse_tolerances(tolerance or [])
    names = distinct_names(traces)
    replays = _replay_all(traces, names, held, scheduler_cls, knob_values)
    results = [(name, r.diff, judge(r.diff, fail_on, tolerances))
               for name, r in zip(names, replays, strict=True)]  # fmt: skip
    console = Console()
    for (_, diff, verdict), replayed in zip(results, replays, strict=True) if verbose else []:
        print_diff(console, diff, verdict, b_label=_under_test(replayed))
    console.print(_summary(results))
    for trace, steps in held.items():
        if steps is not None:
            console.print(f"{safe_text(str(trace))} is incomplete (recording stopped early): "
                          f"compared the {steps} steps it holds", highlight=False,
                          markup=False)  # fmt: skip
    if junit is not None:
        write_report(junit, diffs_to_junit(results), "--junit")
    if markdown is not None:
        report = "".join(
            diff_to_markdown(d, v, title=n, b_label=_under_test(r))
            for (n, d, v), r in zip(results, replays, strict=True)
        )
        write_report(markdown, report, "--markdown")
    if any(verdict.failed for _, _, verdict in results):
        raise typer.Exit(1)


def _replay_all(
    traces: list[Path],
    names: list[str],
    held: dict[Path, int | None],
    scheduler_cls: type[Scheduler] | None,
    knobs: dict[str, object],
) -> list[WhatIfReplay]:
    """Each baseline's inputs through the scheduler under test, with a progress line.

    An incomplete baseline is replayed only as far as it was recorded."""
    replays: list[WhatIfReplay] = []
    extra = {} if scheduler_cls is None else {"scheduler_cls": scheduler_cls}
    with tempfile.TemporaryDirectory() as scratch, StepProgress() as progress:
        for index, (trace, name) in enumerate(zip(traces, names, strict=True)):
            progress.start(f"[{index + 1}/{len(traces)}] {name}", _num_steps(trace))
            output = Path(scratch) / f"{index}.duckdb"
            replays.append(replay_whatif(
                trace, output, knobs, sinks=[progress], max_steps=held[trace], **extra
            ))  # fmt: skip
    return replays


def _num_steps(trace: Path) -> int:
    with open_trace(trace) as opened:
        return opened.num_steps


def _under_test(replayed: WhatIfReplay) -> str:
    """Side B of a check: the baseline's inputs replayed through the scheduler under test."""
    knobs = ", ".join(f"{k}={v}" for k, v in replayed.knobs.items())
    return f"replay through {replayed.scheduler}" + (f" with {knobs}" if knobs else "")


def _traces(paths: list[Path]) -> list[Path]:
    traces: list[Path] = []
    for path in paths:
        if path.is_dir():
            traces.extend(sorted(path.rglob("*.duckdb")))
        elif path.exists():
            traces.append(path)
        else:
            raise InputError(f"{path}: no such trace or folder")
    if not traces:
        raise InputError(f"no *.duckdb traces under {', '.join(map(str, paths))}")
    return traces


def _steps_held(trace: Path) -> int | None:
    """Read the whole baseline; the steps it holds when it is incomplete, else None."""
    with open_trace(trace) as opened:
        opened.read_all()
        return None if opened.complete else opened.num_steps


def _summary(results: list[tuple[str, TraceDiff, Verdict]]) -> Table:
    table = Table(title="stepscope check", title_justify="left")
    widest = max((len(name) for name, _, _ in results), default=0)
    table.add_column("baseline", min_width=min(widest, 40), overflow="fold")
    for name in ("result", "first divergence", "steps", "preemptions", "mean ttft"):
        table.add_column(name)
    for name, diff, verdict in results:
        outcome = "[red]FAIL[/]" if verdict.failed else "[green]pass[/]"
        divergence = (
            "none"
            if diff.first_decision_step is None
            else f"step {diff.first_decision_step} ({diff.classification})"
        )
        table.add_row(Text(safe_text(name)), outcome, divergence, *(_pair(diff, m) for m in
                      ("steps_to_drain", "preemptions", "mean_ttft_steps")))  # fmt: skip
    return table


def _pair(diff: TraceDiff, metric: str) -> str:
    before, after = diff.metrics[metric]
    return str(before) if before == after else f"{before} -> {after}"
