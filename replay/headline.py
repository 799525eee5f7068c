"""A step comparison's headline as styled text, the same in `stepscope diff` and the TUI."""

from __future__ import annotations

from rich.text import Text

from .diff import Classification, StepComparison

HEADLINE_STYLES = {
    Classification.IDENTICAL: "bold green",
    Classification.INPUTS_ONLY: "bold yellow",
    Classification.INPUT: "bold yellow",
    Classification.DECISION: "bold red",
}
"""The style of a comparison's class, wherever it is shown (here and in the TUI)."""


def headline_text(steps: StepComparison) -> Text:
    """The comparison's headline, styled by its class."""
    where, why = steps.headline
    style = HEADLINE_STYLES[steps.classification]
    if not why:
        return Text(where, style=style)
    return Text.assemble((where, "bold"), (why, style))
