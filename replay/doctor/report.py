"""`stepscope doctor`'s report, for a terminal and as Markdown: the findings worst first,
each with its cost, the command that shows it, and the cure a what-if replay checked.
Everything from the trace goes through `safe_text` (and rich's `escape` on a terminal)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from stepscope.safe_text import safe_text

from .diagnose import Diagnosis
from .finding import Finding, Severity

SEVERITY_STYLES = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "dim"}
"""How each severity is drawn, on the command line and in the TUI."""


def print_diagnosis(console: Console, diagnosis: Diagnosis) -> None:
    first, last = diagnosis.window
    console.print(f"{escape(safe_text(str(diagnosis.trace)))}: steps {first}..{last}, "
                  f"{_count(diagnosis.findings)}")  # fmt: skip
    for finding in diagnosis.findings:
        style = SEVERITY_STYLES[finding.severity]
        console.print()
        console.print(f"[{style}]{finding.severity.label}[/] {finding.kind}: "
                      f"{escape(safe_text(finding.summary))}")  # fmt: skip
        for line in _details(finding, what_ifs=diagnosis.what_ifs):
            console.print(f"  {escape(line)}", soft_wrap=True)


def diagnosis_to_markdown(diagnosis: Diagnosis) -> str:
    first, last = diagnosis.window
    lines = [
        f"## stepscope doctor: `{_code(str(diagnosis.trace))}`",
        "",
        f"Steps {first}..{last}: {_count(diagnosis.findings)}.",
    ]
    for finding in diagnosis.findings:
        lines += ["", f"### {finding.severity.label}: `{finding.kind}`", "",
                  _markdown_text(finding.summary), ""]  # fmt: skip
        lines += [
            f"- {_markdown_text(line)}" for line in _details(finding, what_ifs=diagnosis.what_ifs)
        ]
    return "\n".join(lines) + "\n"


def _details(finding: Finding, *, what_ifs: bool) -> list[str]:
    first, last = finding.steps
    lines = [f"steps {first}..{last}; cost: {_pairs(finding.cost)}"]
    if finding.requests:
        lines.append("requests: " + ", ".join(safe_text(r) for r in finding.requests))
    lines.append(f"evidence: {safe_text(finding.evidence)}")
    if finding.what_if is not None:
        effect = ", ".join(f"{name} {before} -> {after}"
                           for name, (before, after) in finding.what_if.effect.items())  # fmt: skip
        verdict = "removes it" if finding.what_if.removes else "shrinks it"
        lines.append(f"what-if: {_pairs(finding.what_if.knobs)} {verdict}: {effect} "
                     "(checked by replay)")  # fmt: skip
    elif what_ifs and finding.tried:
        tried = "; ".join(_pairs(knobs) for knobs in finding.tried)
        lines.append(f"what-if: none of {tried} removed it or lowered {finding.target} by "
                     "a quarter")  # fmt: skip
    elif what_ifs:
        lines.append("what-if: no knob this tool can change would lift this limit")
    return lines


def _count(findings: list[Finding]) -> str:
    if not findings:
        return "no findings"
    worst = findings[0].severity.label
    return f"{len(findings)} finding(s), the worst {worst}"


def _pairs(values: dict[str, Any]) -> str:
    return " ".join(f"{name}={value}" for name, value in values.items())


def _code(text: str) -> str:
    return safe_text(text).replace("`", "'")


def _markdown_text(text: str) -> str:
    """`text` with Markdown's and HTML's active characters escaped."""
    escaped = safe_text(text)
    for char in "\\`*_[]<>|#":
        escaped = escaped.replace(char, "\\" + char)
    return escaped
