"""`prefix_cache_thrash`: prompt prefixes another request had computed (a system prompt,
a conversation's history) evicted from the prefix cache before the next request that
shares them is admitted, so it computes them again."""

from __future__ import annotations

from .candidates import more_blocks
from .examined import Examined
from .finding import SHOWN_REQUESTS, Finding, Severity

KIND = "prefix_cache_thrash"

LOST_SHARE = 0.25
"""The share of the cacheable prefix tokens computed again that makes it a finding: an
LRU pool under load loses some; a quarter is a pool too small for the shared working set."""

CRITICAL_SHARE = 0.1
"""The share of all the window's scheduled tokens spent computing lost prefixes again that
makes it critical: as much as vllm#54644's recompute tax in real serving."""

MIN_LOST_BLOCKS = 8
"""Blocks' worth of tokens lost, at the least, before the share counts (a few admissions
missing a block each is noise)."""


def prefix_cache_thrash(examined: Examined) -> list[Finding]:
    rows = examined.rows("doctor_prefix_cache")
    cached = sum(row["cached_tokens"] for row in rows)
    lost_rows = [row for row in rows if row["tokens_recomputed"] > 0]
    lost = sum(row["tokens_recomputed"] for row in lost_rows)
    if lost < MIN_LOST_BLOCKS * examined.config.block_size or lost < LOST_SHARE * cached:
        return []
    share = lost / cached
    summary = (
        f"{len(lost_rows)} admission(s) computed again {lost:,} prompt tokens another request "
        f"had computed before them ({share:.0%} of the {cached:,} the prefix cache could have "
        "held): their blocks were evicted first"
    )
    return [
        Finding(
            kind=KIND,
            severity=Severity.CRITICAL
            if lost >= CRITICAL_SHARE * examined.num_scheduled_tokens
            else Severity.WARNING,
            summary=summary,
            steps=(min(r["step"] for r in lost_rows), max(r["step"] for r in lost_rows)),
            requests=tuple(row["request_id"] for row in lost_rows[:SHOWN_REQUESTS]),
            cost={"tokens_recomputed": lost, "num_admissions": len(lost_rows),
                  "share_lost": round(share, 4)},
            evidence=examined.evidence(KIND),
            candidates=more_blocks(examined.config),
            target="prefix_tokens_recomputed",
        )
    ]  # fmt: skip
