"""The diff's headline: whether the configs differ, the first divergence and its class."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from stepscope.safe_text import shown_text

if TYPE_CHECKING:
    from stepscope.replay.diff import StepComparison

MAX_LISTED_REQUESTS = 5


class DiffBanner(Static):
    """What the diff found, in the words `stepscope diff` uses."""

    HELP = """
## Diff

Steps are aligned by number and compared as `stepscope diff` compares them:
the scheduled requests with tokens and kind in order, preempted ids, free blocks
after `schedule()`, block ids handed out (unless `--ignore block_ids`) and the
step that processed the output. A step one trace lacks is divergent too. Configs
or workloads that differ are named first. The first divergence is *input* when
arrivals/aborts differed at or before it, or sampled tokens differed earlier;
otherwise *decision*. `d` / `D` jump to the next / previous divergent step.
"""

    def show(self, diff: StepComparison | None, a_name: str, b_name: str) -> None:
        text = Text()
        text.append(shown_text(f"diff {a_name} ↔ {b_name}: "), style="bold")
        if diff is None:
            text.append("comparing…", style="dim")
            self.update(text)
            return
        # Imported once a diff exists: it brings pyarrow.compute, which a lone trace never needs.
        from stepscope.replay.headline import headline_text

        if diff.config_differences:
            text.append("configs differ: ", style="bold yellow")
            text.append(shown_text(diff.config_changes) + "\n")
        if diff.workload_differences:
            text.append("workloads differ: ", style="bold yellow")
            listed = diff.workload_differences[:MAX_LISTED_REQUESTS]
            text.append("; ".join(map(shown_text, listed)) + "\n")
        if diff.divergent_steps:
            text.append(f"{len(diff.divergent_steps):,} divergent steps; ", style="bold")
        text.append_text(headline_text(diff))
        self.update(text)
