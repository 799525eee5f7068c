"""`priority_inversion`: a more important waiting request (a lower priority value) that the
KV cache cannot take while less important ones run and hold the blocks it needs. vLLM
preempts only for a running request that needs blocks; a waiting one never evicts."""

from __future__ import annotations

from typing import Any

from stepscope.engine import SchedulingPolicy

from .candidates import more_blocks
from .examined import Examined
from .finding import SHOWN_REQUESTS, Finding, Severity, span

KIND = "priority_inversion"

INVERTED_STEPS = 10
"""Steps a head must wait behind less important running requests: fewer is a decode wave
finishing, which no scheduler that does not preempt for a waiting request avoids."""

CRITICAL_STEPS = 50


def priority_inversion(examined: Examined) -> list[Finding]:
    heads = [row for row in examined.rows("doctor_priority_inversion")
             if row["num_steps"] >= INVERTED_STEPS]  # fmt: skip
    if not heads:
        return []
    worst = heads[0]
    holders = worst["holders"]
    summary = (
        f"{worst['head']} (priority {worst['priority']}) waited {worst['num_steps']} steps "
        f"for KV blocks while {worst['num_holders']} less important request(s) ran "
        f"({', '.join(holders[:3])}{', ...' if len(holders) > 3 else ''})"
        + (f"; {len(heads) - 1} more head(s) so" if len(heads) > 1 else "")
    )
    return [
        Finding(
            kind=KIND,
            severity=Severity.by(worst["num_steps"], CRITICAL_STEPS),
            summary=summary,
            steps=span(heads),
            requests=(worst["head"], *holders[: SHOWN_REQUESTS - 1]),
            cost={"steps_inverted": sum(r["num_steps"] for r in heads), "num_heads": len(heads),
                  "max_steps_inverted": worst["num_steps"]},
            evidence=examined.evidence(KIND, request_id=worst["head"]),
            candidates=_candidates(examined),
            target="ttft_p99_steps",
        )
    ]  # fmt: skip


def _candidates(examined: Examined) -> tuple[dict[str, Any], ...]:
    """Under FCFS the priorities are not looked at: ordering by them comes first."""
    config = examined.config
    by_priority = () if config.policy is SchedulingPolicy.PRIORITY else ({"policy": "priority"},)
    return (*by_priority, *more_blocks(config))
