"""`starvation`: a request that waits far longer than the requests that arrived with it,
and the reason it waited most (why_waiting's, worded as that view words it)."""

from __future__ import annotations

import statistics
from typing import Any

from .candidates import (
    chunked_prefill,
    more_batched_tokens,
    more_blocks,
    more_loras,
    more_seqs,
    shorter_prefill_interval,
)
from .examined import Examined
from .finding import SHOWN_REQUESTS, Finding, Severity, span

KIND = "starvation"

STARVED_FACTOR = 4
"""How many times its peers' median wait a request must wait to be starved: queueing
theory's tail at high load is a few times the median; past four it is the policy."""

STARVED_STEPS = 20
"""The least wait that counts (a few steps is no one's problem, whatever the median)."""

CRITICAL_FACTOR = 10

CRITICAL_STEPS = 200
"""The least wait that is critical, whatever the median: a few seconds of TTFT on a GPU
(when most requests wait no step at all, ten times the median is no bar)."""


def starvation(examined: Examined) -> list[Finding]:
    rows = examined.rows("doctor_waiting")
    num_requests = rows[0]["num_requests"] if rows else 0
    if num_requests < 2:
        return []
    median = _median_wait(rows, num_requests)
    bar = max(STARVED_STEPS, STARVED_FACTOR * median)
    starved = [row for row in rows if row["num_waiting_steps"] >= bar]
    if not starved:
        return []
    worst = starved[0]
    reason = worst["main_reason"]
    summary = (
        f"{len(starved)} of {num_requests} request(s) waited {STARVED_FACTOR}x the median wait "
        f"({median:g} steps) or more: {worst['request_id']} waited {worst['num_waiting_steps']} "
        f"steps, mostly {reason}"
    )
    critical = worst["num_waiting_steps"] >= max(CRITICAL_STEPS, CRITICAL_FACTOR * median)
    return [
        Finding(
            kind=KIND,
            severity=Severity.CRITICAL if critical else Severity.WARNING,
            summary=summary,
            steps=span(starved),
            requests=tuple(row["request_id"] for row in starved[:SHOWN_REQUESTS]),
            cost={
                "num_starved": len(starved),
                "max_waiting_steps": worst["num_waiting_steps"],
                "median_waiting_steps": median,
            },
            evidence=examined.evidence(KIND, request_id=worst["request_id"]),
            candidates=_candidates(examined, reason),
            target="ttft_p99_steps",
        )
    ]


def _median_wait(rows: list[dict[str, Any]], num_requests: int) -> float:
    """The median wait of all `num_requests` requests: `rows`' and a wait of 0 for each of
    the others (the rows list only the requests that waited)."""
    waits: list[int] = [row["num_waiting_steps"] for row in rows]
    return statistics.median([0] * (num_requests - len(rows)) + waits)


def _candidates(examined: Examined, reason: str) -> tuple[dict[str, Any], ...]:
    """The limit the starved request's main reason names."""
    config = examined.config
    by_reason = {
        "budget": more_batched_tokens,
        "max_num_seqs": more_seqs,
        "chunking_off": chunked_prefill,
        "lora_gate": more_loras,
        "prefill_held": shorter_prefill_interval,
    }
    return by_reason.get(reason, more_blocks)(config)
