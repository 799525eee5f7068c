"""`spec_decode_waste`: speculative decoding whose drafts are mostly rejected, so every
step verifies tokens that are thrown away and spends the budget they took."""

from __future__ import annotations

from typing import Any

from .examined import Examined
from .finding import SHOWN_REQUESTS, Finding, Severity

KIND = "spec_decode_waste"

LOW_ACCEPTANCE = 0.3
"""The acceptance rate below which drafts cost more than they save: below a third the
mean acceptance length of k=3 drafts is under 2 tokens a step, about what the drafter
and the verification's extra tokens cost back."""

CRITICAL_ACCEPTANCE = 0.1

MIN_DRAFTS = 100
"""Drafts verified before the rate is a finding rather than noise."""


def spec_decode_waste(examined: Examined) -> list[Finding]:
    (row,) = examined.rows("doctor_spec_decode")
    drafts, accepted = row["num_draft_tokens"], row["num_accepted_tokens"]
    if drafts < MIN_DRAFTS or accepted >= LOW_ACCEPTANCE * drafts:
        return []
    rate = accepted / drafts
    k = examined.config.num_speculative_tokens
    summary = (
        f"{rate:.0%} of {drafts:,} draft tokens accepted ({drafts - accepted:,} verified and "
        f"thrown away, num_speculative_tokens={k})"
    )
    return [
        Finding(
            kind=KIND,
            severity=Severity.CRITICAL if rate < CRITICAL_ACCEPTANCE else Severity.WARNING,
            summary=summary,
            steps=(row["first_step"], row["last_step"]),
            requests=tuple(row["worst_requests"][:SHOWN_REQUESTS]),
            cost={"draft_tokens": drafts, "rejected_tokens": drafts - accepted,
                  "acceptance_rate": round(rate, 4)},
            evidence=examined.evidence(KIND),
            candidates=_fewer_drafts(k),
            target="rejected_draft_tokens",
        )
    ]  # fmt: skip


def _fewer_drafts(k: int) -> tuple[dict[str, Any], ...]:
    """Fewer drafts a step, one less first (the drafter's own quality is not a knob)."""
    return tuple({"num_speculative_tokens": fewer} for fewer in range(k - 1, 0, -1))
