"""`preemption_thrash`: requests preempted again and again, each time throwing away the
tokens they had computed, which they compute again when they resume (the recompute tax)."""

from __future__ import annotations

from .candidates import more_blocks
from .examined import Examined
from .finding import SHOWN_REQUESTS, Finding, Severity, span

KIND = "preemption_thrash"

THRASH_PREEMPTIONS = 3
"""Preemptions of one request that make it thrash: one can be bad luck, two a burst of
load; a third means the pool cannot hold what the scheduler keeps admitting."""

CRITICAL_TAX = 0.10
"""The share of scheduled tokens spent recomputing that makes thrash critical: vllm#54644
measured 10-23 % in real serving, where users called it a regression."""


def preemption_thrash(examined: Examined) -> list[Finding]:
    rows = examined.rows("doctor_preemption_thrash")
    thrashing = [row for row in rows if row["num_preemptions"] >= THRASH_PREEMPTIONS]
    if not thrashing:
        return []
    num_preemptions = sum(row["num_preemptions"] for row in rows)
    recomputed = sum(row["tokens_recomputed"] for row in rows)
    tax = recomputed / examined.num_scheduled_tokens if examined.num_scheduled_tokens else 0.0
    worst = thrashing[0]
    summary = (
        f"{len(thrashing)} request(s) preempted {THRASH_PREEMPTIONS}+ times "
        f"({worst['request_id']}: {worst['num_preemptions']}); {recomputed:,} computed tokens "
        f"thrown away and recomputed, {tax:.1%} of the tokens scheduled"
    )
    return [
        Finding(
            kind=KIND,
            severity=Severity.by(tax, CRITICAL_TAX),
            summary=summary,
            steps=span(rows),
            requests=tuple(row["request_id"] for row in thrashing[:SHOWN_REQUESTS]),
            cost={
                "num_preemptions": num_preemptions,
                "num_thrashing_requests": len(thrashing),
                "tokens_recomputed": recomputed,
                "recompute_tax": round(tax, 4),
            },
            evidence=examined.evidence(KIND),
            candidates=more_blocks(examined.config),
            target="num_preemptions",
        )
    ]
