"""`stepscope check`: replay baseline traces with the current scheduler and diff them, for CI."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from stepscope.baseline_names import distinct_names
from stepscope.engine import InputError, Scheduler
from stepscope.inputs import load_scheduler_class, parse_knob
from stepscope.output_paths import check_outputs, claims_stdout, write_text
from stepscope.progress import StepProgress
from stepscope.replay.diff import TraceDiff
from stepscope.replay.from_step import StepWindow
from stepscope.replay.report import (
    diff_to_json,
    diff_to_markdown,
    diffs_to_junit,
    format_value,
    print_diff,
)
from stepscope.replay.verdict import FailOn, Verdict, judge, parse_tolerances
from stepscope.replay.whatif import WhatIfReplay, replay_whatif
from stepscope.run_printout import run_console
from stepscope.safe_text import safe_text
from stepscope.schema import open_trace
from stepscope.schema.recording_layout import is_recording, writer_pid
from stepscope.schema.set_members import traces_in
from stepscope.stop_signals import stops_like_ctrl_c

from .diff import FailOnOption, ToleranceOption
from .options import ForceOption, FromStepOption, KnobsOption, ToStepOption, step_window
from .report_options import AppendOption, JunitOption, MarkdownOption, report_outputs

Result = tuple[str, TraceDiff, Verdict]
"""A baseline's name, its diff with the replay, and the verdict on it."""
METRIC_COLUMNS = {
    "steps": "steps_to_drain",
    "preemptions": "preemptions",
    "mean ttft": "mean_ttft_steps",
}
"""The summary's metric columns and the diff metric each shows, before -> after."""


@stops_like_ctrl_c
def check(
    baselines: Annotated[
        list[Path],
        typer.Argument(
            help="Baseline traces (files or recording folders), or folders holding them."
        ),
    ],
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", metavar="module:Class", help="The Scheduler to check."),
    ] = None,
    knobs: KnobsOption = None,
    junit: JunitOption = None,
    markdown: MarkdownOption = None,
    *,
    append: AppendOption = False,
    force: ForceOption = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON document: each baseline's diff as diff --json gives it (the "
            "table goes to stderr).",
        ),
    ] = False,
    fail_on: FailOnOption = FailOn.DECISIONS,
    tolerance: ToleranceOption = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Show each full diff.")] = False,
    from_step: FromStepOption = None,
    to_step: ToStepOption = None,
) -> None:
    """Replay each baseline's inputs through the current scheduler and diff it with the baseline.

    Exit 0 when every baseline passes (--fail-on), 1 when one does not, 2 on bad input.
    A report never replaces a trace or an input, and another file only with --force.

    --from-step S [--to-step E] checks steps S to E of every baseline only, each starting
    from the recorded state at S (its nearest checkpoint at or before S, run to S)."""
    window = step_window(from_step, to_step)
    junit_out, markdown_out = report_outputs(junit, markdown, append=append)
    traces = _traces(baselines)
    inputs = [*traces, *baselines]
    check_outputs(
        [junit_out, markdown_out],
        inputs,
        force=force,
        stdout_taken_by=["--json"] if as_json else [],
    )
    held = {trace: _held(trace) for trace in traces}
    scheduler_cls = load_scheduler_class(scheduler) if scheduler else None
    knob_values = dict(parse_knob(k) for k in knobs or [])
    tolerances = parse_tolerances(tolerance or [])
    names = distinct_names(traces)
    replays = _replay_all(traces, names, held, scheduler_cls, knob_values, window)
    results = [(name, r.diff, judge(r.diff, fail_on, tolerances))
               for name, r in zip(names, replays, strict=True)]  # fmt: skip
    if junit_out is not None:
        write_text(junit_out, diffs_to_junit(results))
    if markdown_out is not None:
        report = "".join(
            diff_to_markdown(d, v, title=n, b_label=_under_test(r))
            for (n, d, v), r in zip(results, replays, strict=True)
        )
        write_text(markdown_out, report)
    console = run_console(stderr=as_json or claims_stdout([junit_out, markdown_out]))
    for (_, diff, verdict), replayed in zip(results, replays, strict=True) if verbose else []:
        print_diff(console, diff, verdict, b_label=_under_test(replayed))
    console.print(_summary(results), crop=False)
    for trace, steps in held.items():
        if steps is not None:
            console.print(f"{safe_text(str(trace))} {steps.state()}: compared the "
                          f"{steps.describe()}", highlight=False, markup=False)  # fmt: skip
    if as_json:
        typer.echo(json.dumps(_check_json(traces, results, replays, held), default=str))
    if any(verdict.failed for _, _, verdict in results):
        raise typer.Exit(1)


def _check_json(
    traces: list[Path],
    results: list[Result],
    replays: list[WhatIfReplay],
    held: dict[Path, _Held | None],
) -> dict[str, Any]:
    """`diff --json`'s document per baseline, side B named as the replay, in one document."""
    baselines = []
    for trace, (name, diff, verdict), replayed in zip(traces, results, replays, strict=True):
        document = diff_to_json(diff, verdict)
        document["b"] = _under_test(replayed)
        result = "fail" if verdict.failed else "pass"
        steps = held[trace]
        num_held = None if steps is None else steps.num_steps
        baselines.append({"name": name, "result": result, "steps_held": num_held, **document})
    return {"failed": any(v.failed for _, _, v in results), "baselines": baselines}


def _replay_all(
    traces: list[Path],
    names: list[str],
    held: dict[Path, _Held | None],
    scheduler_cls: type[Scheduler] | None,
    knobs: dict[str, object],
    window: StepWindow,
) -> list[WhatIfReplay]:
    """Each baseline's inputs through the scheduler under test over `window`, with a
    progress line.

    An incomplete baseline is replayed only as far as it was recorded."""
    replays: list[WhatIfReplay] = []
    with tempfile.TemporaryDirectory() as scratch, StepProgress() as progress:
        for index, (trace, name) in enumerate(zip(traces, names, strict=True)):
            progress.start(f"[{index + 1}/{len(traces)}] {name}", _num_steps(trace))
            output = Path(scratch) / f"{index}.duckdb"
            steps = held[trace]
            replays.append(replay_whatif(
                trace, output, knobs, sinks=[progress],
                max_steps=None if steps is None else steps.last_step + 1,
                scheduler_cls=scheduler_cls, window=window,
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
        if is_recording(path):
            traces.append(path)
        elif path.is_dir():
            traces.extend(traces_in(path))
        elif path.exists():
            traces.append(path)
        else:
            raise InputError(f"{path}: no such trace or folder")
    if not traces:
        raise InputError(
            f"no traces (*.duckdb or recording folders) under {', '.join(map(str, paths))}"
        )
    return traces


@dataclass(frozen=True)
class _Held:
    """The steps an incomplete baseline holds: its replay stops after the last."""

    num_steps: int
    first_step: int
    last_step: int
    being_recorded: bool
    """A process recorded into the folder when it was read: not complete yet."""

    def state(self) -> str:
        if self.being_recorded:
            return "is being recorded"
        return "is incomplete (recording stopped early)"

    def describe(self) -> str:
        held = "held when read" if self.being_recorded else "holds"
        return f"{self.num_steps} steps it {held} ({self.first_step}..{self.last_step})"


def _held(trace: Path) -> _Held | None:
    """Read the whole baseline; when it is incomplete, the steps it holds, else None."""
    with open_trace(trace) as opened:
        opened.read_all()
        if opened.complete:
            return None
        live = writer_pid(trace) is not None
        return _Held(opened.num_steps, opened.first_step, opened.last_step, live)


def _summary(results: list[Result]) -> Table:
    """One row per baseline; no column is narrower than a word of it (a metric pair is one),
    so a narrow console makes the table wider than the console, never a number shorter."""
    rows = [_row(diff, verdict) for _, diff, verdict in results]
    table = Table(title="stepscope check", title_justify="left")
    widest = max((len(name) for name, _, _ in results), default=0)
    table.add_column("baseline", min_width=min(widest, 40), overflow="fold")
    for index, heading in enumerate(["result", "first divergence", *METRIC_COLUMNS]):
        cells = [row[index].plain for row in rows]
        whole = heading in METRIC_COLUMNS
        table.add_column(heading, min_width=_least_width(heading, cells, whole=whole))
    for (name, _, _), row in zip(results, rows, strict=True):
        table.add_row(Text(safe_text(name)), *row)
    return table


def _row(diff: TraceDiff, verdict: Verdict) -> list[Text]:
    outcome = Text("FAIL", style="red") if verdict.failed else Text("pass", style="green")
    divergence = (
        "none"
        if diff.first_decision_step is None
        else f"step {diff.first_decision_step} ({diff.classification})"
    )
    pairs = [Text(_pair(diff, metric)) for metric in METRIC_COLUMNS.values()]
    return [outcome, Text(divergence), *pairs]


def _least_width(heading: str, cells: list[str], *, whole: bool) -> int:
    """The longest word of the heading and the cells (the longest cell when `whole`)."""
    words = [*heading.split(), *(cells if whole else (w for c in cells for w in c.split()))]
    return max(len(word) for word in words)


def _pair(diff: TraceDiff, metric: str) -> str:
    before, after = map(format_value, diff.metrics[metric])
    return before if before == after else f"{before} -> {after}"
