"""`head_of_line_blocking`: a waiting head the KV cache cannot take holds admission (vLLM's
FCFS waiting pass stops at it) while requests behind it would have fit in the blocks free."""

from __future__ import annotations

from .candidates import more_blocks
from .examined import Examined
from .finding import SHOWN_REQUESTS, Finding, Severity, span

KIND = "head_of_line_blocking"

BLOCKING_STEPS = 10
"""Steps a head must hold back requests that fit: fewer is a head waiting out a decode
wave's blocks coming free, which FCFS means it to do, and costs those behind a fraction of
a second."""

CRITICAL_STEPS = 50
"""Steps of blocking that make it critical: the requests behind have waited that many
decode steps for nothing, about a second of TTFT on a typical GPU."""


def head_of_line_blocking(examined: Examined) -> list[Finding]:
    """One finding for all the heads that blocked so; the longest is the one named."""
    heads = [row for row in examined.rows("doctor_head_of_line")
             if row["num_steps"] >= BLOCKING_STEPS]  # fmt: skip
    if not heads:
        return []
    worst = heads[0]
    held = sorted({behind for row in heads for behind in row["behind"]})
    num_steps = sum(row["num_steps"] for row in heads)
    summary = (
        f"{len(heads)} waiting head(s) the KV cache could not take held admission for "
        f"{num_steps} steps while requests behind would have fit (worst: {worst['head']} "
        f"needed {worst['head_blocks_needed']} blocks for {worst['num_steps']} steps, "
        f"{worst['num_behind']} request(s) behind it fitting in the {worst['max_free_blocks']} "
        "free)"
    )
    return [
        Finding(
            kind=KIND,
            severity=Severity.by(worst["num_steps"], CRITICAL_STEPS),
            summary=summary,
            steps=span(heads),
            requests=tuple(row["head"] for row in heads[:SHOWN_REQUESTS]),
            cost={"steps_blocked": num_steps, "num_heads": len(heads),
                  "requests_held": len(held)},
            evidence=examined.evidence(KIND, head=worst["head"]),
            candidates=more_blocks(examined.config),
            target="ttft_mean_steps",
        )
    ]  # fmt: skip
