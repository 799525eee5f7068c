"""Diff and replay results for people (rich) and for CI (JSON, JUnit XML, Markdown)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any
from xml.etree import ElementTree

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from stepscope.engine.probe import (
    AdmissionCall,
    Decision,
    Preemption,
    RefusedRunningCall,
    RunningGrant,
)

from stepscope.safe_text import safe_text

from .diff import StepSide, TraceDiff
from .exact import ExactReplay
from .headline import headline_text
from .step_decision import StepDecision
from .verdict import Verdict
from .vllm_replay import VllmReplay
from .whatif import WhatIfReplay

MAX_REQUEST_ROWS = 15
MAX_LISTED_STEPS = 20


# ----- diff ---------------------------------------------------------------------


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
        console.print("[bold red]FAIL[/] " + "; ".join(verdict.reasons), highlight=False)


def _step_table(diff: TraceDiff) -> Table:
    assert diff.first_step_detail is not None
    a, b = diff.first_step_detail
    table = Table(title=f"step {diff.first_decision_step}", title_justify="left", show_lines=True)
    table.add_column("", style="bold")
    table.add_column("A")
    table.add_column("B")
    table.add_row("scheduled", _scheduled(a), _scheduled(b))
    table.add_row("preempted", _preempted(a), _preempted(b))
    table.add_row("allocations", _allocations(a), _allocations(b))
    table.add_row("passes", _passes(a), _passes(b))
    return table


def _lines(lines: Iterable[str]) -> str:
    """A table cell's lines, each made safe to print ("-" for none)."""
    return "\n".join(map(safe_text, lines)) or "-"


def _scheduled(side: StepSide) -> str:
    return _lines(
        f"{rid} {kind} {n} tok{(' +' + str(list(blocks))) if blocks else ''}"
        for rid, kind, n, _, blocks, _ in side.scheduled
    )


def _preempted(side: StepSide) -> str:
    return _lines(f"{rid} for {by} ({lost} tokens lost)" for rid, by, lost in side.preemptions)


def _allocations(side: StepSide) -> str:
    lines = []
    for rid, pass_, n, needed, free, granted, refusal in side.allocations:
        outcome = "granted" if granted else f"refused ({refusal})"
        lines.append(f"{rid} {pass_} {n} tok: {needed} block(s), {free} free, {outcome}")
    return _lines(lines)


def _passes(side: StepSide) -> str:
    step = side.step
    if not step:
        return "-"
    return (
        f"budget {step.get('num_scheduled_tokens')}/{step.get('token_budget')}, "
        f"running pass: {step.get('running_pass_end')}, admission: {step.get('admission_stop')}"
    )


def _request_table(diff: TraceDiff) -> Table:
    table = Table(title=f"{len(diff.request_deltas)} requests changed", title_justify="left")
    for name in ("request", "what changed (A -> B)"):
        table.add_column(name)
    for delta in diff.request_deltas[:MAX_REQUEST_ROWS]:
        changes = ", ".join(f"{f} {_fmt(delta.a[f])} -> {_fmt(delta.b[f])}" for f in delta.changed)
        table.add_row(safe_text(delta.request_id), changes)
    return table


def _metrics_table(diff: TraceDiff, verdict: Verdict) -> Table:
    table = Table(title="run metrics", title_justify="left")
    for name, justify in (("metric", "left"), ("A", "right"), ("B", "right"), ("change", "right"),
                          ("check", "left")):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    checks = {c.name: c for c in verdict.metric_checks}
    for name, (a, b) in diff.metrics.items():
        check = checks.get(name)
        mark = "" if check is None else ("ok" if check.passed else f"worse (tol {check.tolerance})")
        table.add_row(name, _fmt(a), _fmt(b), _change(a, b), mark)
    return table


def _change(a: Any, b: Any) -> str:
    if not isinstance(a, int | float) or not isinstance(b, int | float) or a == b:
        return ""
    percent = f" ({(b - a) / a * 100:+.1f}%)" if a else ""
    return f"{b - a:+.4g}{percent}"


def _fmt(value: Any) -> str:
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
        for label, render in (("scheduled", _scheduled), ("preempted", _preempted),
                              ("allocations", _allocations), ("passes", _passes)):  # fmt: skip
            lines.append(f"| {label} | {_cell(render(a))} | {_cell(render(b))} |")
    lines += ["", "| metric | A | B | change |", "|---|---:|---:|---:|"]
    lines += [
        f"| {n} | {_fmt(a)} | {_fmt(b)} | {_change(a, b)} |" for n, (a, b) in diff.metrics.items()
    ]
    if diff.request_deltas:
        lines += ["", f"{len(diff.request_deltas)} requests changed; first ones:", ""]
        lines += ["| request | A → B |", "|---|---|"]
        for delta in diff.request_deltas[:MAX_REQUEST_ROWS]:
            changes = ", ".join(
                f"{f} {_fmt(delta.a[f])} → {_fmt(delta.b[f])}" for f in delta.changed
            )
            lines.append(f"| {delta.request_id} | {changes} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def diffs_to_junit(results: list[tuple[str, TraceDiff, Verdict]]) -> str:
    """One test suite per compared pair: decisions, inputs and each metric as test cases."""
    root = ElementTree.Element("testsuites", name="stepscope")
    for name, diff, verdict in results:
        suite = ElementTree.SubElement(root, "testsuite", name=name)
        cases = _junit_cases(diff, verdict)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for _, failure in cases if failure)))
        for case_name, failure in cases:
            case = ElementTree.SubElement(suite, "testcase", classname=name, name=case_name)
            if failure:
                ElementTree.SubElement(case, "failure", message=failure).text = failure
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


# ----- exact replay ---------------------------------------------------------------


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
    recorded, replayed = divergence.recorded, divergence.replayed
    for label in _EXACT_ROWS:
        table.add_row(label, _decision_field(recorded, label), _decision_field(replayed, label))
    console.print(table)
    if divergence.replayed_decisions:
        lines = [
            Text("  " + safe_text(describe_decision(d))) for d in divergence.replayed_decisions
        ]
        console.print(Group(Text("replayed decisions that step:", style="bold"), *lines))


_EXACT_ROWS = (
    "scheduled",
    "preempted",
    "num_free_blocks",
    "block_ids",
    "update_step",
    "sampled",
)


def _decision_field(decision: StepDecision | None, name: str) -> str:
    if decision is None:
        return "(no such step)"
    if name == "scheduled":
        return _lines(f"{rid} {kind} {n} tok" for rid, n, kind in decision.scheduled)
    if name == "block_ids":
        return _lines(f"{rid} {list(ids)}" for rid, ids in decision.block_ids.items())
    value = _json_field(decision, name)
    return safe_text(str(value))


def describe_decision(decision: Decision) -> str:
    """One line for an allocation call or preemption the scheduler made."""
    if isinstance(decision, RunningGrant):
        return f"{decision.request_id}: running, granted"
    if isinstance(decision, RefusedRunningCall):
        refusal = decision.refusal
        return (
            f"{decision.request_id}: running, {decision.num_new_tokens} tok, needs "
            f"{refusal.num_blocks_needed} block(s) with {refusal.num_free_blocks} free: refused"
        )
    if isinstance(decision, AdmissionCall):
        outcome = "granted" if decision.refusal is None else f"refused ({decision.refusal.check})"
        return (
            f"{decision.request_id}: admission, {decision.num_new_tokens} tok "
            f"({decision.num_new_computed_tokens} hit), "
            f"{decision.num_free_blocks_before} free: {outcome}"
        )
    assert isinstance(decision, Preemption)
    return (
        f"{decision.request_id}: preempted for {decision.needed_by} "
        f"({decision.num_computed_tokens_discarded} tokens discarded)"
    )


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
            "recorded": _decision_json(divergence.recorded),
            "replayed": _decision_json(divergence.replayed),
            "replayed_decisions": [describe_decision(d) for d in divergence.replayed_decisions],
        }
    return data


def _decision_json(decision: StepDecision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    return {name: _json_field(decision, name) for name in _DECISION_JSON}


_DECISION_JSON = ("step", "idle", "scheduled", "preempted", "num_free_blocks", "block_ids",
                  "update_step", "sampled")  # fmt: skip


def _json_field(decision: StepDecision, name: str) -> Any:
    """A decision's part by its name in `differences`, as plain JSON values."""
    if name == "scheduled":
        return [
            {"request_id": rid, "num_tokens": n, "kind": str(kind)}
            for rid, n, kind in decision.scheduled
        ]
    if name == "preempted":
        return sorted(decision.preempted_req_ids)
    if name == "block_ids":
        return {rid: list(ids) for rid, ids in decision.block_ids.items()}
    if name == "sampled":
        return list(decision.sampled_token_ids)
    return getattr(decision, name)


# ----- what-if ----------------------------------------------------------------------


def print_whatif(
    console: Console, result: WhatIfReplay, verdict: Verdict, kept: bool = True
) -> None:
    changes = ", ".join(f"{k}={v}" for k, v in result.knobs.items()) or "no knob changes"
    where = f"new trace {result.output}" if kept else "new trace not kept (-o to keep it)"
    console.print(f"what-if: {changes}; scheduler {result.scheduler}; {where}", highlight=False)
    print_diff(console, result.diff, verdict)
    if result.cost_model is not None and result.cost_model.problem is not None:
        console.print(
            f"[yellow]no modelled seconds: the step-time fit is poor "
            f"({result.cost_model.problem}): {result.cost_model.describe()}[/]",
            highlight=False,
        )
    elif result.cost_model is not None:
        table = Table(
            title=f"in seconds, modelled: {result.cost_model.describe()}", title_justify="left"
        )
        for name in ("metric", "original", "what-if"):
            table.add_column(name)
        for name, (before, after) in result.seconds.items():
            table.add_row(name, _fmt(before), _fmt(after))
        console.print(table)
    if result.num_placeholder_tokens:
        console.print(
            f"[yellow]{result.num_placeholder_tokens} tokens were sampled past a request's "
            "recorded outputs (placeholder token 0)[/]",
            highlight=False,
        )


# ----- replay through vLLM ------------------------------------------------------


def print_vllm_replay(console: Console, result: VllmReplay, verdict: Verdict) -> None:
    console.print(
        f"replayed {result.trace} through vLLM {result.vllm_version}'s {result.scheduler_class}"
        + (f", kept at {result.output}" if result.output is not None else ""),
        highlight=False,
    )
    if result.num_padded_tokens:
        console.print(
            f"{result.num_padded_tokens} tokens sampled past the recorded outputs "
            "(placeholders: the run took another course)",
            highlight=False,
        )
    print_diff(console, result.diff, verdict)
