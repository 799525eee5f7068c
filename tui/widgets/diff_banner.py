"""The diff's headline: the first divergence and its class, and how this step compares."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

if TYPE_CHECKING:
    from ..diffing import TraceDiff


class DiffBanner(Static):
    """What the diff found, and whether the cursor's step differs."""

    HELP = """
## Diff

Steps are aligned by number and their decisions compared: scheduled requests
with tokens and kind in order, preempted ids, free blocks after `schedule()`.
The first divergence is *input* when arrivals/aborts differed at or before it,
or sampled tokens differed earlier; otherwise *decision*. `d` / `D` jump to the
next / previous divergent step.
"""

    def show(self, diff: TraceDiff | None, a_name: str, b_name: str) -> None:
        text = Text()
        text.append(f"diff {a_name} ↔ {b_name}: ", style="bold")
        if diff is None:
            text.append("comparing…", style="dim")
        elif diff.first_divergence is None:
            text.append(diff.summary, style="bold green")
        else:
            text.append(
                diff.summary, style="bold red" if diff.kind == "decision" else "bold yellow"
            )
        self.update(text)
