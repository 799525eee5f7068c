"""An exact replay's report: for people (rich) and as JSON, both sides read from their rows."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stepscope.safe_text import safe_text

from .diff import StepSide
from .diff_report import _STEP_ROWS, cell_lines
from .exact import ExactReplay


def print_exact(console: Console, result: ExactReplay) -> None:
    scope = "" if result.trace_complete else " (the trace is incomplete: compared what it holds)"
    if result.divergence is None:
        console.print(
            f"[bold green]identical[/]: {result.num_compared_steps} of "
            f"{result.num_recorded_steps} recorded steps replayed with the same decisions{scope}",
            highlight=False,
        )
        return
    divergence = result.divergence
    console.print(
        f"[bold red]diverged at step {divergence.step}[/] "
        f"({', '.join(divergence.fields)}) after {result.num_compared_steps} identical steps",
        highlight=False,
    )
    table = Table(show_lines=True)
    table.add_column("", style="bold")
    table.add_column("recorded")
    table.add_column("replayed")
    for label, render in (*_STEP_ROWS, *_EXACT_ROWS):
        table.add_row(label, _cell(divergence.recorded, render), _cell(divergence.replayed, render))
    table.add_row(
        "skipped",
        Text(_skipped(divergence.recorded_skips)),
        Text(_skipped(divergence.replayed_skips)),
    )
    console.print(table)


def _skipped(skips: tuple[tuple[str, str], ...]) -> str:
    return cell_lines(f"{rid}: waiting, skipped ({reason})" for rid, reason in skips)


def _cell(side: StepSide | None, render: Any) -> Text:
    return Text("(no such step)" if side is None else render(side))


def _free_blocks(side: StepSide) -> str:
    return safe_text(str(side.step.get("num_free_blocks_after_schedule", "-")))


def _update_step(side: StepSide) -> str:
    return safe_text(str(side.step.get("update_step", "-")))


def _sampled(side: StepSide) -> str:
    return cell_lines(f"{row[0]} {row[5]}" for row in side.scheduled if row[5] is not None)


_EXACT_ROWS = (
    ("free blocks", _free_blocks),
    ("update step", _update_step),
    ("sampled", _sampled),
)
"""What exact replay compares beyond the diff's step rows."""


def exact_to_json(result: ExactReplay) -> dict[str, Any]:
    data: dict[str, Any] = {
        "trace": str(result.trace),
        "identical": result.divergence is None,
        "num_recorded_steps": result.num_recorded_steps,
        "num_compared_steps": result.num_compared_steps,
        "trace_complete": result.trace_complete,
        "output": None if result.output is None else str(result.output),
    }
    if result.divergence is not None:
        divergence = result.divergence
        data["divergence"] = {
            "step": divergence.step,
            "fields": list(divergence.fields),
            "recorded": _side_json(divergence.step, divergence.recorded, divergence.recorded_skips),
            "replayed": _side_json(divergence.step, divergence.replayed, divergence.replayed_skips),
        }
    return data


def _side_json(
    step: int, side: StepSide | None, skips: tuple[tuple[str, str], ...]
) -> dict[str, Any] | None:
    """One side of the divergent step: its decision and allocation calls, as plain values."""
    if side is None:
        return None
    row = side.step
    return {
        "step": step,
        "idle": row.get("idle", True),
        "scheduled": [
            {"request_id": rid, "num_tokens": n, "kind": str(kind)}
            for rid, kind, n, *_ in side.scheduled
        ],
        "preempted": sorted(rid for rid, *_ in side.preemptions),
        "num_free_blocks": row.get("num_free_blocks_after_schedule"),
        "block_ids": {rid: list(blocks) for rid, _, _, _, blocks, _ in side.scheduled if blocks},
        "update_step": row.get("update_step"),
        "sampled": [token for *_, token in side.scheduled],
        "allocations": [
            dict(zip(_ALLOCATION_COLUMNS, allocation, strict=True))
            for allocation in side.allocations
        ],
        "skipped": [{"request_id": rid, "reason": reason} for rid, reason in skips],
    }


_ALLOCATION_COLUMNS = (
    "request_id",
    "pass",
    "num_new_tokens",
    "num_blocks_needed",
    "num_free_blocks_before",
    "granted",
    "refusal",
)
"""`StepSide.allocations`' columns."""
