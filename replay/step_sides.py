"""One step of two traces side by side, as the diff report shows its first divergent step.

Each side is a `StepDetail` (`read_step`); a report that compares two traces at a step
(the diff, exact replay) renders it with `step_table` or `step_markdown`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rich.table import Table
from rich.text import Text
from stepscope.schema import StepDetail

from stepscope.safe_text import safe_text

StepSides = tuple[StepDetail, StepDetail]
"""One step as each of two traces holds it."""


def cell_lines(lines: Iterable[str]) -> str:
    """A table cell's lines, each made safe to print ("-" for none)."""
    return "\n".join(map(safe_text, lines)) or "-"


def _scheduled(side: StepDetail) -> str:
    return cell_lines(
        f"{r['request_id']} {r['kind']} {r['num_tokens']} tok"
        + (f" +{list(r['new_block_ids'])}" if r["new_block_ids"] else "")
        for r in side.scheduled.dicts()
    )


def _preempted(side: StepDetail) -> str:
    return cell_lines(
        f"{p['request_id']} for {p['needed_by']} ({p['num_computed_tokens_discarded']} tokens lost)"
        for p in side.preemptions.dicts()
    )


def _worth_showing(call: dict[str, Any]) -> bool:
    """Every refusal, every admission, and running grants that needed new blocks."""
    return not call["granted"] or call["pass"] == "waiting" or call["num_blocks_needed"] > 0


def _allocations(side: StepDetail) -> str:
    lines = []
    for call in filter(_worth_showing, side.allocations.dicts()):
        outcome = "granted" if call["granted"] else f"refused ({call['refusal']})"
        lines.append(
            f"{call['request_id']} {call['pass']} {call['num_new_tokens']} tok: "
            f"{call['num_blocks_needed']} block(s), {call['num_free_blocks_before']} free, "
            f"{outcome}"
        )
    return cell_lines(lines)


def _passes(side: StepDetail) -> str:
    row = side.row
    if row is None:
        return "-"
    return safe_text(
        f"budget {row['num_scheduled_tokens']}/{row['token_budget']}, "
        f"running pass: {row['running_pass_end']}, admission: {row['admission_stop']}"
    )


STEP_ROWS: tuple[tuple[str, Callable[[StepDetail], str]], ...] = (
    ("scheduled", _scheduled),
    ("preempted", _preempted),
    ("allocations", _allocations),
    ("passes", _passes),
)
"""The rows comparing one step of two traces, each with how a side's cell is written."""


def step_table(title: str, sides: StepSides, labels: tuple[str, str]) -> Table:
    """The step of both traces as a rich table, a column per side named by `labels`."""
    table = Table(title=title, title_justify="left", show_lines=True)
    table.add_column("", style="bold")
    for label in labels:
        table.add_column(label)
    for name, render in STEP_ROWS:
        table.add_row(name, *(Text(render(side)) for side in sides))
    return table


def step_markdown(title: str, sides: StepSides, labels: tuple[str, str]) -> list[str]:
    """The step of both traces as the lines of a Markdown table."""
    lines = [f"| {title} | {labels[0]} | {labels[1]} |", "|---|---|---|"]
    for name, render in STEP_ROWS:
        lines.append(f"| {name} | {' | '.join(markdown_cell(render(side)) for side in sides)} |")
    return lines


def markdown_cell(text: str) -> str:
    """Safe `text` as one Markdown table cell: its `|` escaped, its lines joined by `<br>`."""
    return text.replace("|", "\\|").replace("\n", "<br>")
