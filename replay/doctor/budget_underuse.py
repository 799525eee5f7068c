"""`budget_underuse`: steps that leave half their token budget or more unused while
requests wait on something else (the KV cache, max_num_seqs, chunking off), which the
report names: the GPU runs under-filled batches with work queued."""

from __future__ import annotations

from typing import Any

from .candidates import (
    chunked_prefill,
    more_blocks,
    more_loras,
    more_seqs,
    shorter_prefill_interval,
)
from .examined import Examined
from .finding import Finding, Severity, span

KIND = "budget_underuse"

UNDERUSED_STEPS = 20
"""Steps of half-empty batches with work waiting that make it a finding: a few are the
tail of a burst."""

CRITICAL_SHARE = 0.5
"""The share of all the window's busy steps that makes it critical: half the run with
half the budget idle is a quarter of the GPU's throughput left unused."""


def budget_underuse(examined: Examined) -> list[Finding]:
    rows = examined.rows("doctor_budget_underuse")
    num_steps = sum(row["num_steps"] for row in rows)
    if num_steps < UNDERUSED_STEPS:
        return []
    main = rows[0]
    unused = sum(row["tokens_unused"] for row in rows)
    budget = sum(row["token_budget"] for row in rows)
    share = num_steps / examined.num_busy_steps
    stops = ", ".join(f"{row['admission_stop']} {row['num_steps']}" for row in rows)
    summary = (
        f"{num_steps} steps ({share:.0%} of those that ran) left half their token budget or "
        f"more unused while requests waited: {unused:,} of {budget:,} tokens; the waiting "
        f"pass stopped on {stops} step(s)"
    )
    return [
        Finding(
            kind=KIND,
            severity=Severity.by(share, CRITICAL_SHARE),
            summary=summary,
            steps=span(rows),
            requests=(),
            cost={"steps_underused": num_steps, "tokens_unused": unused,
                  "share_of_steps": round(share, 4)},
            evidence=examined.evidence(KIND),
            candidates=_candidates(examined, main["admission_stop"]),
            target="ttft_mean_steps",
        )
    ]  # fmt: skip


def _candidates(examined: Examined, stop: str) -> tuple[dict[str, Any], ...]:
    """The limit that held the most unused tokens back."""
    config = examined.config
    if stop == "max_num_seqs":
        return more_seqs(config)
    if stop == "chunking_off":
        return chunked_prefill(config)
    if stop in ("kv_full", "kv_full_sequence", "preempted_this_step"):
        return more_blocks(config)
    if stop == "no_waiting":  # every waiting request was passed over, for its adapter
        return more_loras(config)
    if stop == "prefill_held":
        return shorter_prefill_interval(config)
    return ()
