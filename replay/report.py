"""Replay and diff results for people (rich) and for CI (JSON, JUnit XML, Markdown).

Each kind of result has its own module; the what-if and vLLM replays print a diff.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from stepscope.safe_text import safe_text

from .diff_report import (
    diff_to_json,
    diff_to_markdown,
    diffs_to_junit,
    format_value,
    print_diff,
)
from .exact_report import exact_to_json, print_exact
from .verdict import Verdict
from .vllm_replay import VllmReplay
from .whatif import WhatIfReplay

__all__ = [
    "diff_to_json",
    "diff_to_markdown",
    "diffs_to_junit",
    "exact_to_json",
    "format_value",
    "print_diff",
    "print_exact",
    "print_vllm_replay",
    "print_whatif",
]


def print_whatif(
    console: Console, result: WhatIfReplay, verdict: Verdict, *, kept: bool = True
) -> None:
    changes = ", ".join(f"{k}={v}" for k, v in result.knobs.items()) or "no knob changes"
    where = f"new trace {result.output}" if kept else "new trace not kept (-o to keep it)"
    console.print(
        escape(safe_text(f"what-if: {changes}; scheduler {result.scheduler}; {where}")),
        highlight=False,
    )
    print_diff(console, result.diff, verdict)
    if result.cost_model is not None and result.cost_model.problem is not None:
        console.print(
            f"[yellow]no modelled seconds: the step-time fit is poor "
            f"({result.cost_model.problem}): {result.cost_model.describe()}[/]",
            highlight=False,
        )
    elif result.cost_model is not None:
        table = Table(
            title=f"in seconds, modelled: {result.cost_model.describe()}", title_justify="left"
        )
        for name in ("metric", "original", "what-if"):
            table.add_column(name)
        for name, (before, after) in result.seconds.items():
            table.add_row(name, format_value(before), format_value(after))
        console.print(table)
    if result.num_placeholder_tokens:
        console.print(
            f"[yellow]{result.num_placeholder_tokens} tokens were sampled past a request's "
            "recorded outputs (placeholder token 0)[/]",
            highlight=False,
        )


def print_vllm_replay(console: Console, result: VllmReplay, verdict: Verdict) -> None:
    console.print(
        safe_text(
            f"replayed {result.trace} through vLLM {result.vllm_version}'s "
            f"{result.scheduler_class}"
            + (f", kept at {result.output}" if result.output is not None else "")
        ),
        highlight=False,
        markup=False,
    )
    if result.num_padded_tokens:
        console.print(
            f"{result.num_padded_tokens} tokens sampled past the recorded outputs "
            "(placeholders: the run took another course)",
            highlight=False,
        )
    print_diff(console, result.diff, verdict)
