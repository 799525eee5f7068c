"""The tape model's drafter and rejection sampler: drafts scripted per request, as the oracle's.

After a request samples, its drafts are the next k tokens of its tape (0 past the end),
except that from the first mispredicted position on every draft is `tape + 1`. Which
positions are mispredicted is the request's draft script: `draft_accept[j]` drafts are
right at the j-th verification of real drafts (k after the list), else the draft for
output i is wrong when `(i + 1) % draft_mismatch_every == 0`, else none. Verification
accepts the longest prefix of the drafts that matches the tape and samples one bonus
token after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

VOCAB_SIZE = 32000
"""A mispredicted draft is `(tape + 1) % VOCAB_SIZE`, as the oracle's fake drafter makes it."""


@dataclass(frozen=True, slots=True)
class DraftScript:
    """Which of a request's drafts are right (see the module docstring)."""

    draft_mismatch_every: int | None = None
    draft_accept: tuple[int, ...] | None = None


def tape_token(tape: Sequence[int], index: int, pad_token_id: int) -> int:
    return tape[index] if index < len(tape) else pad_token_id


class TapeDrafter:
    """Proposes and verifies drafts against each request's tape."""

    def __init__(
        self,
        num_speculative_tokens: int,
        scripts: Mapping[str, DraftScript],
        pad_token_id: int,
    ) -> None:
        self.num_speculative_tokens = num_speculative_tokens
        self.scripts = scripts
        self.pad_token_id = pad_token_id
        self.num_verifications: dict[str, int] = {}
        """Verifications of real (not all -1) drafts so far, per request."""

    def verify(self, req_id: str, tape: Sequence[int], base: int, drafts: Sequence[int]) -> int:
        """How many of `drafts` (for outputs `base`, `base + 1`, …) the model accepts."""
        if any(token != -1 for token in drafts):
            self.num_verifications[req_id] = self.num_verifications.get(req_id, 0) + 1
        num_accepted = 0
        for token in drafts:
            if token != tape_token(tape, base + num_accepted, self.pad_token_id):
                break
            num_accepted += 1
        return num_accepted

    def propose(self, req_id: str, tape: Sequence[int], base: int) -> tuple[int, ...]:
        """Drafts for outputs `base` … `base + k - 1`."""
        num_right = self._num_right(req_id, base)
        pad = self.pad_token_id
        return tuple(
            tape_token(tape, base + i, pad)
            if i < num_right
            else (tape_token(tape, base + i, pad) + 1) % VOCAB_SIZE
            for i in range(self.num_speculative_tokens)
        )

    def _num_right(self, req_id: str, base: int) -> int:
        k = self.num_speculative_tokens
        script = self.scripts.get(req_id)
        if script is None:
            return k
        if script.draft_accept is not None:
            j = self.num_verifications.get(req_id, 0)
            accept = script.draft_accept
            return min(k, accept[j]) if j < len(accept) else k
        every = script.draft_mismatch_every
        if every is not None:
            return next((i for i in range(k) if (base + i + 1) % every == 0), k)
        return k
