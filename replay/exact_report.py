"""An exact replay's report: for people (rich) and as JSON, both sides read from their rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from stepscope.schema import StepDetail

from stepscope.safe_text import safe_text

from .exact import ExactReplay
from .step_sides import STEP_ROWS, cell_lines


def print_exact(console: Console, result: ExactReplay) -> None:
    scope = _scope(result)
    for gap in result.gaps:
        console.print(
            f"[yellow]{gap.describe()}[/]: replayed again from the checkpoint at step "
            f"{gap.last_step + 1}",
            highlight=False,
        )
    if result.divergence is None:
        console.print(
            f"[bold green]identical[/]: {_compared_steps(result)} replayed with the same "
            f"decisions{scope}",
            highlight=False,
        )
        return
    divergence = result.divergence
    console.print(
        f"[bold red]diverged at step {divergence.step}[/] "
        f"({', '.join(divergence.fields)}) after {result.num_compared_steps} identical steps"
        + _started(result, ", "),
        highlight=False,
    )
    if result.state_differences:
        console.print(
            f"[bold red]the state was wrong, not a decision[/]: the checkpoint at step "
            f"{result.checkpoint_step} is not the state the recording reaches there:",
            highlight=False,
        )
        for difference in result.state_differences:
            console.print(f"  {escape(safe_text(difference))}", highlight=False)
    table = Table(show_lines=True)
    table.add_column("", style="bold")
    table.add_column("recorded")
    table.add_column("replayed")
    for label, render in (*STEP_ROWS, *_EXACT_ROWS):
        table.add_row(label, _cell(divergence.recorded, render), _cell(divergence.replayed, render))
    console.print(table)


def _compared_steps(result: ExactReplay) -> str:
    """The steps compared, in words: of all recorded, or the window's and where it started."""
    window = result.window
    if window.whole:
        return f"{result.num_compared_steps} of {result.num_recorded_steps} recorded steps"
    last = result.num_recorded_steps - 1 if result.last_step is None else result.last_step
    end = last if window.to_step is None else min(window.to_step, last)
    return (
        f"steps {window.from_step}..{end} ({result.num_compared_steps} compared"
        f"{_started(result, ', ')})"
    )


def _started(result: ExactReplay, joint: str = " ") -> str:
    """Where a windowed replay started, after `joint` (empty for a whole replay)."""
    if result.checkpoint_step is None:
        return ""
    if result.checkpoint_step == 0:
        return f"{joint}run from step 0: no checkpoint before"
    return f"{joint}from the checkpoint at step {result.checkpoint_step}"


def _cell(side: StepDetail, render: Callable[[StepDetail], str]) -> Text:
    return Text(render(side) if side.in_trace else "(no such step)")


def _row_value(name: str) -> Callable[[StepDetail], str]:
    def render(side: StepDetail) -> str:
        return safe_text(str((side.row or {}).get(name, "-")))

    return render


def _sampled(side: StepDetail) -> str:
    return cell_lines(
        f"{row['request_id']} {row['sampled_token_id']}"
        for row in side.scheduled.dicts()
        if row["sampled_token_id"] is not None
    )


def _skipped(side: StepDetail) -> str:
    return cell_lines(f"{rid}: waiting, skipped ({reason})" for rid, reason in _skips(side))


def _skips(side: StepDetail) -> list[tuple[str, str]]:
    """(request id, reason) of each waiting request the step passed over, in order."""
    return [(e["request_id"], e["detail"]) for e in side.events.dicts() if e["kind"] == "skip"]


_EXACT_ROWS = (
    ("free blocks", _row_value("num_free_blocks_after_schedule")),
    ("update step", _row_value("update_step")),
    ("sampled", _sampled),
    ("skipped", _skipped),
)
"""What exact replay compares beyond the diff's step rows, and the waiting requests skipped."""


def _scope(result: ExactReplay) -> str:
    """What the comparison covered, when the trace does not hold its run to the end."""
    if result.trace_complete:
        return ""
    if result.dropped_from is not None:
        return (
            f" (the recorder fell behind and dropped the steps from {result.dropped_from} "
            "on: compared what it holds)"
        )
    if result.being_recorded:
        return " (a process records into it now: compared the steps it held when read)"
    return " (the trace is incomplete: compared what it holds)"


def exact_to_json(result: ExactReplay) -> dict[str, Any]:
    data: dict[str, Any] = {
        "trace": str(result.trace),
        "identical": result.divergence is None,
        "num_recorded_steps": result.num_recorded_steps,
        "num_compared_steps": result.num_compared_steps,
        "trace_complete": result.trace_complete,
        "being_recorded": result.being_recorded,
        "dropped_from": result.dropped_from,
        "output": None if result.output is None else str(result.output),
        "from_step": result.window.from_step,
        "to_step": result.window.to_step,
        "checkpoint_step": result.checkpoint_step,
        "state_differences": list(result.state_differences),
        "not_recorded": [
            {"first_step": gap.first_step, "last_step": gap.last_step, "why": gap.why}
            for gap in result.gaps
        ],
    }
    if result.divergence is not None:
        divergence = result.divergence
        data["divergence"] = {
            "step": divergence.step,
            "fields": list(divergence.fields),
            "recorded": _side_json(divergence.recorded),
            "replayed": _side_json(divergence.replayed),
        }
    return data


def _side_json(side: StepDetail) -> dict[str, Any] | None:
    """One side of the divergent step: its decision and allocation calls, as plain values."""
    if not side.in_trace:
        return None
    row = side.row or {}
    scheduled = list(side.scheduled.dicts())
    return {
        "step": side.step,
        "idle": row.get("idle", True),
        "scheduled": [
            {"request_id": s["request_id"], "num_tokens": s["num_tokens"], "kind": s["kind"]}
            for s in scheduled
        ],
        "preempted": sorted(p["request_id"] for p in side.preemptions.dicts()),
        "num_free_blocks": row.get("num_free_blocks_after_schedule"),
        "block_ids": {
            s["request_id"]: list(s["new_block_ids"]) for s in scheduled if s["new_block_ids"]
        },
        "update_step": row.get("update_step"),
        "sampled": [s["sampled_token_id"] for s in scheduled],
        "allocations": list(side.allocations.dicts()),
        "skipped": [{"request_id": rid, "reason": reason} for rid, reason in _skips(side)],
    }
