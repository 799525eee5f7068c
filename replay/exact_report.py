"""An exact replay's report: for people (rich) and as JSON, with the replay's decisions."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text
from stepscope.engine.probe import (
    AdmissionCall,
    Decision,
    RefusedRunningCall,
    WaitingSkip,
)
from stepscope.engine.request import RunningGrant

from stepscope.safe_text import safe_text

from .diff_report import cell_lines
from .exact import ExactReplay
from .step_decision import StepDecision


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
        table.add_row(
            label, Text(_decision_field(recorded, label)), Text(_decision_field(replayed, label))
        )
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
        return cell_lines(f"{rid} {kind} {n} tok" for rid, n, kind in decision.scheduled)
    if name == "block_ids":
        return cell_lines(f"{rid} {list(ids)}" for rid, ids in decision.block_ids.items())
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
    if isinstance(decision, WaitingSkip):
        return f"{decision.request_id}: waiting, skipped ({decision.reason})"
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
