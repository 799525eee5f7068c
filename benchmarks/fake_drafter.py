"""The fake model's drafter for the speculative-decoding benchmark: k drafts per step, accepted
counts from a seeded pattern, so stepscope's and vLLM's schedulers see the same outcome.

Imports nothing from stepscope or vLLM (both benchmark sides use it, see `step_timer.py`).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from typing import Any

DRAFT_TOKEN_ID = 1000
"""Every draft token (the scheduler reads only how many were drafted and accepted)."""

PATTERN_LEN = 1009


class SeededDrafter:
    """Proposes k drafts after each sampling step; the j-th verification of a request accepts
    `pattern[(crc32(req_id) + j) % PATTERN_LEN]` of them (capped by how many were scheduled)."""

    def __init__(
        self,
        num_speculative_tokens: int,
        seed: int,
        make_draft_ids: Callable[[list[str], list[list[int]]], Any],
    ) -> None:
        rng = random.Random(seed)
        self.num_speculative_tokens = num_speculative_tokens
        self.pattern = [rng.randint(0, num_speculative_tokens) for _ in range(PATTERN_LEN)]
        self.make_draft_ids = make_draft_ids
        self.num_verifications: dict[str, int] = {}

    def num_accepted(self, req_id: str, num_drafts: int) -> int:
        """How many of the `num_drafts` scheduled drafts the fake model accepts."""
        if num_drafts == 0:
            return 0
        j = self.num_verifications.get(req_id, 0)
        self.num_verifications[req_id] = j + 1
        index = (zlib.crc32(req_id.encode()) + j) % PATTERN_LEN
        return min(self.pattern[index], num_drafts)

    def propose(self, sampled: dict[str, list[int]]) -> Any:
        """The drafts after a step, as the model runner hands them to `update_draft_token_ids`:
        k for each request that sampled, none for a prefill chunk (ngram proposes nothing)."""
        req_ids = list(sampled)
        k = self.num_speculative_tokens
        drafts = [[DRAFT_TOKEN_ID] * k if sampled[req_id] else [] for req_id in req_ids]
        return self.make_draft_ids(req_ids, drafts)


def case_drafter(
    case: dict[str, Any],
    num_speculative_tokens: int,
    make_draft_ids: Callable[[list[str], list[list[int]]], Any],
) -> SeededDrafter | None:
    """The fake model's drafter for a speculative-decoding case (None for the others)."""
    if "draft_seed" not in case:
        return None
    return SeededDrafter(num_speculative_tokens, case["draft_seed"], make_draft_ids)
