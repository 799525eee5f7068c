"""A diff's report: for people (rich) and for CI (JSON, JUnit XML, Markdown)."""

from __future__ import annotations

import dataclasses
from typing import Any
from xml.etree import ElementTree

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from stepscope.safe_text import safe_text

from .diff import RequestDelta, TraceDiff
from .headline import headline_text
from .step_sides import markdown_cell, step_markdown, step_table
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
        title = f"step {diff.first_decision_step}"
        console.print(step_table(title, diff.first_step_detail, ("A", "B")))
    if diff.request_deltas:
        console.print(_request_table(diff))
    console.print(_metrics_table(diff, verdict))
    if verdict.failed:
        reasons = escape(safe_text("; ".join(verdict.reasons)))
        console.print(f"[bold red]FAIL[/] {reasons}", highlight=False)


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
    if diff.first_step_detail is not None:
        data["first_step_detail"] = [side.as_json() for side in diff.first_step_detail]
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
            f"`{k}` {a} → {b}" for k, a, b in diff.config_change_texts())]  # fmt: skip
    if diff.first_step_detail is not None:
        title = f"step {diff.first_decision_step}"
        lines += ["", *step_markdown(title, diff.first_step_detail, ("A", "B"))]
    lines += ["", "| metric | A | B | change |", "|---|---:|---:|---:|"]
    lines += [
        f"| {n} | {format_value(a)} | {format_value(b)} | {_change(a, b)} |"
        for n, (a, b) in diff.metrics.items()
    ]
    if diff.request_deltas:
        lines += ["", f"{len(diff.request_deltas)} requests changed; first ones:", ""]
        lines += ["| request | A → B |", "|---|---|"]
        for delta in diff.request_deltas[:MAX_REQUEST_ROWS]:
            request = markdown_cell(safe_text(delta.request_id))
            lines.append(f"| {request} | {markdown_cell(_changes(delta, '→'))} |")
        if len(diff.request_deltas) > MAX_REQUEST_ROWS:
            lines += ["", _more_requests(diff)]
    # Each line escaped whole: a trace's line break cannot start a line of the report.
    return "\n".join(map(safe_text, lines)) + "\n"


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
        ("config", "; ".join(f"{k}: {a} -> {b}" for k, a, b in diff.config_change_texts())
         if diff.config_differences and "configs differ" in verdict.reasons else None),
        ("decisions", decision_failure),
    ]  # fmt: skip
    for check in verdict.metric_checks:
        failed = not check.passed and any(r.startswith(check.name) for r in verdict.reasons)
        message = f"{check.baseline} -> {check.value} (tolerance {check.tolerance})"
        cases.append((f"metric {check.name}", message if failed else None))
    return cases
