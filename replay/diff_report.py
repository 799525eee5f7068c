"""A diff's report: for people (rich) and for CI (JSON, JUnit XML, Markdown)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any
from xml.etree import ElementTree

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from stepscope.safe_text import safe_text

from .diff import RequestDelta, StepSide, TraceDiff
from .headline import headline_text
from .verdict import Verdict

MAX_REQUEST_ROWS = 15
MAX_LISTED_STEPS = 20


def print_diff(
    console: Console, diff: TraceDiff, verdict: Verdict, b_label: str | None = None
) -> None:
    """The whole diff; `b_label` names side B when its file is not what it is."""
    side_b = b_label or str(diff.b)
    console.print(
        safe_text(
            f"A {diff.a} ({diff.num_steps[0]} steps)   B {side_b} ({diff.num_steps[1]} steps)"
        ),
        markup=False,
    )
    if diff.config_differences:
        changes = escape(safe_text(diff.config_changes))
        console.print(f"[bold yellow]configs differ:[/] {changes}", highlight=False)
    if diff.workload_differences:
        listed = escape(safe_text("; ".join(diff.workload_differences[:5])))
        console.print(f"[bold yellow]workloads differ:[/] {listed}", highlight=False)
    console.print(headline_text(diff))
    if diff.divergent_steps:
        shown = ", ".join(map(str, diff.divergent_steps[:MAX_LISTED_STEPS]))
        more = " ..." if len(diff.divergent_steps) > MAX_LISTED_STEPS else ""
        console.print(f"{len(diff.divergent_steps)} steps differ: {shown}{more}", highlight=False)
    if diff.first_step_detail is not None:
        console.print(_step_table(diff))
    if diff.request_deltas:
        console.print(_request_table(diff))
    console.print(_metrics_table(diff, verdict))
    if verdict.failed:
        reasons = escape(safe_text("; ".join(verdict.reasons)))
        console.print(f"[bold red]FAIL[/] {reasons}", highlight=False)


def _step_table(diff: TraceDiff) -> Table:
    assert diff.first_step_detail is not None
    a, b = diff.first_step_detail
    table = Table(title=f"step {diff.first_decision_step}", title_justify="left", show_lines=True)
    table.add_column("", style="bold")
    table.add_column("A")
    table.add_column("B")
    for label, render in _STEP_ROWS:
        table.add_row(label, Text(render(a)), Text(render(b)))
    return table


def cell_lines(lines: Iterable[str]) -> str:
    """A table cell's lines, each made safe to print ("-" for none)."""
    return "\n".join(map(safe_text, lines)) or "-"


def _scheduled(side: StepSide) -> str:
    return cell_lines(
        f"{rid} {kind} {n} tok{(' +' + str(list(blocks))) if blocks else ''}"
        for rid, kind, n, _, blocks, _ in side.scheduled
    )


def _preempted(side: StepSide) -> str:
    return cell_lines(f"{rid} for {by} ({lost} tokens lost)" for rid, by, lost in side.preemptions)


def _allocations(side: StepSide) -> str:
    lines = []
    for rid, pass_, n, needed, free, granted, refusal in side.allocations:
        outcome = "granted" if granted else f"refused ({refusal})"
        lines.append(f"{rid} {pass_} {n} tok: {needed} block(s), {free} free, {outcome}")
    return cell_lines(lines)


def _passes(side: StepSide) -> str:
    step = side.step
    if not step:
        return "-"
    return safe_text(
        f"budget {step.get('num_scheduled_tokens')}/{step.get('token_budget')}, "
        f"running pass: {step.get('running_pass_end')}, admission: {step.get('admission_stop')}"
    )


_STEP_ROWS = (
    ("scheduled", _scheduled),
    ("preempted", _preempted),
    ("allocations", _allocations),
    ("passes", _passes),
)
"""The rows comparing the first divergent step, each with how a side's cell is written."""


def _request_table(diff: TraceDiff) -> Table:
    table = Table(title=f"{len(diff.request_deltas)} requests changed", title_justify="left")
    for name in ("request", "what changed (A -> B)"):
        table.add_column(name)
    for delta in diff.request_deltas[:MAX_REQUEST_ROWS]:
        table.add_row(Text(safe_text(delta.request_id)), Text(_changes(delta, "->")))
    if len(diff.request_deltas) > MAX_REQUEST_ROWS:
        table.caption = _more_requests(diff)
        table.caption_justify = "left"
    return table


def _changes(delta: RequestDelta, arrow: str) -> str:
    """What changed in a request's outcome, A `arrow` B, made safe to print."""
    return safe_text(
        ", ".join(
            f"{f} {format_value(delta.a[f])} {arrow} {format_value(delta.b[f])}"
            for f in delta.changed
        )
    )


def _more_requests(diff: TraceDiff) -> str:
    return f"and {len(diff.request_deltas) - MAX_REQUEST_ROWS:,} more"


def _metrics_table(diff: TraceDiff, verdict: Verdict) -> Table:
    table = Table(title="run metrics", title_justify="left")
    for name, justify in (("metric", "left"), ("A", "right"), ("B", "right"), ("change", "right"),
                          ("check", "left")):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    checks = {c.name: c for c in verdict.metric_checks}
    for name, (a, b) in diff.metrics.items():
        check = checks.get(name)
        mark = "" if check is None else ("ok" if check.passed else f"worse (tol {check.tolerance})")
        table.add_row(name, format_value(a), format_value(b), _change(a, b), mark)
    return table


def _change(a: Any, b: Any) -> str:
    if not isinstance(a, int | float) or not isinstance(b, int | float) or a == b:
        return ""
    percent = f" ({(b - a) / a * 100:+.1f}%)" if a else ""
    return f"{b - a:+.4g}{percent}"


def format_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def diff_to_json(diff: TraceDiff, verdict: Verdict) -> dict[str, Any]:
    data = dataclasses.asdict(diff)
    data["a"], data["b"] = str(diff.a), str(diff.b)
    data["classification"] = str(diff.classification)
    data["verdict"] = dataclasses.asdict(verdict)
    for check in data["verdict"]["metric_checks"]:
        check["tolerance"] = str(check["tolerance"]["amount"]) + (
            "%" if check["tolerance"]["relative"] else ""
        )
    return data


def diff_to_markdown(
    diff: TraceDiff, verdict: Verdict, title: str = "stepscope diff", b_label: str | None = None
) -> str:
    """`b_label` names side B when its file is not what it is (a check's replay, say)."""
    verdict_line = "❌ FAIL: " + "; ".join(verdict.reasons) if verdict.failed else "✅ pass"
    side_b = b_label or f"`{diff.b}`"
    lines = [f"### {title}", "", f"`{diff.a}` vs {side_b} — {verdict_line}", ""]
    lines.append(f"**{headline_text(diff).plain}**")
    if diff.config_differences:
        lines += ["", "Configs differ: " + ", ".join(
            f"`{k}` {a} → {b}" for k, (a, b) in diff.config_differences.items())]  # fmt: skip
    if diff.first_step_detail is not None:
        a, b = diff.first_step_detail
        lines += ["", f"| step {diff.first_decision_step} | A | B |", "|---|---|---|"]
        for label, render in _STEP_ROWS:
            lines.append(f"| {label} | {_cell(render(a))} | {_cell(render(b))} |")
    lines += ["", "| metric | A | B | change |", "|---|---:|---:|---:|"]
    lines += [
        f"| {n} | {format_value(a)} | {format_value(b)} | {_change(a, b)} |"
        for n, (a, b) in diff.metrics.items()
    ]
    if diff.request_deltas:
        lines += ["", f"{len(diff.request_deltas)} requests changed; first ones:", ""]
        lines += ["| request | A → B |", "|---|---|"]
        for delta in diff.request_deltas[:MAX_REQUEST_ROWS]:
            request = _cell(safe_text(delta.request_id))
            lines.append(f"| {request} | {_cell(_changes(delta, '→'))} |")
        if len(diff.request_deltas) > MAX_REQUEST_ROWS:
            lines += ["", _more_requests(diff)]
    # Each line escaped whole: a trace's line break cannot start a line of the report.
    return "\n".join(map(safe_text, lines)) + "\n"


def _cell(text: str) -> str:
    """Safe `text` as one Markdown table cell: its `|` escaped, its lines joined by `<br>`."""
    return text.replace("|", "\\|").replace("\n", "<br>")


def diffs_to_junit(results: list[tuple[str, TraceDiff, Verdict]]) -> str:
    """One test suite per compared pair: decisions, inputs and each metric as test cases.

    Every string is escaped as for a terminal: XML 1.0 cannot hold most control characters.
    """
    root = ElementTree.Element("testsuites", name="stepscope")
    for raw_name, diff, verdict in results:
        name = safe_text(raw_name)
        suite = ElementTree.SubElement(root, "testsuite", name=name)
        cases = _junit_cases(diff, verdict)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for _, failure in cases if failure)))
        for case_name, failure in cases:
            case = ElementTree.SubElement(suite, "testcase", classname=name, name=case_name)
            if failure:
                message = safe_text(failure)
                ElementTree.SubElement(case, "failure", message=message).text = message
    root.set("tests", str(sum(int(s.get("tests", "0")) for s in root)))
    root.set("failures", str(sum(int(s.get("failures", "0")) for s in root)))
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True)


def _junit_cases(diff: TraceDiff, verdict: Verdict) -> list[tuple[str, str | None]]:
    decision_failure = None
    if diff.decisions_differ and any("divergence" in r for r in verdict.reasons):
        decision_failure = headline_text(diff).plain
    cases: list[tuple[str, str | None]] = [
        ("config", "; ".join(f"{k}: {a} -> {b}" for k, (a, b) in diff.config_differences.items())
         if diff.config_differences and "configs differ" in verdict.reasons else None),
        ("decisions", decision_failure),
    ]  # fmt: skip
    for check in verdict.metric_checks:
        failed = not check.passed and any(r.startswith(check.name) for r in verdict.reasons)
        message = f"{check.baseline} -> {check.value} (tolerance {check.tolerance})"
        cases.append((f"metric {check.name}", message if failed else None))
    return cases
