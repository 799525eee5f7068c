"""`f`: `stepscope doctor`'s findings on the trace, worst first; choosing one jumps to its
first step with its requests marked in the step detail. No what-ifs here (they replay the
trace several times over): `stepscope doctor` on the command line checks the cures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from stepscope.replay.doctor import SEVERITY_STYLES, Finding
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from stepscope.safe_text import elided

MAX_SHOWN = 300
"""Characters of a finding's summary drawn in the list (it quotes request ids)."""


def finding_text(finding: Finding) -> Text:
    """One finding as the list draws it: severity, kind, steps, summary (never markup)."""
    first, last = finding.steps
    text = Text(f"{finding.severity.label:<8} ", style=SEVERITY_STYLES[finding.severity])
    text.append(f"{finding.kind}  steps {first}..{last}\n", style="bold")
    text.append(elided(finding.summary, MAX_SHOWN))
    return text


class FindingsScreen(ModalScreen[Finding | None]):
    """The findings; dismissed with the one chosen, or None on escape."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, findings: Sequence[Finding]) -> None:
        super().__init__()
        self.findings = findings

    def compose(self) -> ComposeResult:
        with Vertical(classes="prompt findings"):
            if self.findings:
                yield Label(f"{len(self.findings)} finding(s), worst first: enter jumps to one "
                            "(stepscope doctor TRACE checks the cures by replay)")  # fmt: skip
            else:
                yield Label("no findings: nothing doctor looks for is wrong with this trace")
            yield OptionList(
                *(Option(finding_text(f), id=str(i)) for i, f in enumerate(self.findings)),
                id="findings",
            )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.findings[event.option_index])

    def action_cancel(self) -> None:
        self.dismiss(None)
