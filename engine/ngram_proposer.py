"""Ngram prompt lookup as vLLM 0.33.0's `NgramProposer` drafts, in plain Python.

A request's drafts are the tokens that followed the earliest earlier occurrence of
its longest suffix n-gram (n in `[prompt_lookup_min, prompt_lookup_max]`), at most
k of them and never past `max_model_len`. vLLM finds the match with a KMP scan of
the reversed tokens (numba); this is the same scan, so ties break identically.
"""

from __future__ import annotations

from collections.abc import Sequence

PROMPT_LOOKUP_MIN = 5
PROMPT_LOOKUP_MAX = 5
"""vLLM's n-gram bounds when the speculative config names neither (`SpeculativeConfig`)."""


class NgramProposer:
    """Drafts for the requests that sampled this step and are below `max_model_len`."""

    def __init__(
        self,
        num_speculative_tokens: int,
        max_model_len: int,
        prompt_lookup_min: int = PROMPT_LOOKUP_MIN,
        prompt_lookup_max: int = PROMPT_LOOKUP_MAX,
    ) -> None:
        self.k = num_speculative_tokens
        self.max_model_len = max_model_len
        self.min_n = prompt_lookup_min
        self.max_n = prompt_lookup_max

    def propose(
        self, sampled_token_ids: Sequence[Sequence[int]], token_ids: Sequence[Sequence[int]]
    ) -> list[list[int]]:
        """One draft list per request (empty: it sampled nothing, or no n-gram matched)."""
        drafts: list[list[int]] = []
        for sampled, tokens in zip(sampled_token_ids, token_ids, strict=True):
            if not sampled or len(tokens) >= self.max_model_len:
                drafts.append([])
                continue
            drafts.append(
                find_longest_matched_ngram_and_propose_tokens(
                    tokens, self.min_n, self.max_n, self.max_model_len, self.k
                )
            )
        return drafts


def find_longest_matched_ngram_and_propose_tokens(
    origin_tokens: Sequence[int], min_ngram: int, max_ngram: int, max_model_len: int, k: int
) -> list[int]:
    """vLLM's `_find_longest_matched_ngram_and_propose_tokens`, line for line."""
    total_token = len(origin_tokens)
    if total_token < min_ngram:
        return []
    k = min(k, max_model_len - total_token)
    if k <= 0:
        return []
    longest_ngram, position = _longest_suffix_match(origin_tokens[::-1], max_ngram)
    if longest_ngram < min_ngram:
        return []
    start_position = total_token - 1 - position + longest_ngram
    k = min(k, total_token - start_position)
    return list(origin_tokens[start_position : start_position + k])


def _longest_suffix_match(tokens: Sequence[int], max_ngram: int) -> tuple[int, int]:
    """(n, i): the longest prefix of `tokens` (n <= max_ngram) ending again at i, i latest.

    `tokens` is the context reversed, so its prefix is the context's suffix and the
    latest i is the earliest occurrence in the context.
    """
    lps = [0] * max_ngram
    longest_ngram = 0
    position = 0
    prev_lps = 0
    i = 1
    while i < len(tokens):
        if tokens[prev_lps] == tokens[i]:
            prev_lps += 1
            if prev_lps >= longest_ngram:
                longest_ngram = prev_lps
                position = i
            if i < max_ngram:
                lps[i] = prev_lps
            if prev_lps == max_ngram:
                prev_lps = lps[max_ngram - 1]
            i += 1
        elif prev_lps != 0:
            prev_lps = lps[prev_lps - 1]
        else:
            i += 1
    return longest_ngram, position
