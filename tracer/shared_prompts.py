"""Which other prompt each request's prompt begins with, so a shared prefix is stored once.

A prompt is matched block by block (16 tokens; each block's SHA-256 key chains the
one before it, as vLLM's prefix-cache block hashes do, so equal keys mean equal
prefixes) against the prompts seen before it that are stored whole; the
longest match becomes a reference (that request, that many tokens) and only the
rest of the prompt is stored. Only prompts stored whole are referred to, so the
view `_requests` rebuilds any prompt with one join (and compaction checks it does).
A prompt comes as its tokens' bytes (native 8-byte integers, as DuckDB's BIGINT[] column
reads into Arrow), never as a list of Python ints.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

BLOCK_TOKENS = 16
"""Tokens per matched block: a shared prefix is found to the last whole block."""

TOKEN_BYTES = 8
"""Bytes of one token id in a prompt's bytes (`array('q')`, Arrow's int64)."""

Prompt = bytes | memoryview
"""A prompt's token ids as native 8-byte integers."""


@dataclass
class SharedPrompts:
    """The whole prompts seen so far, by the chained hash of each of their block prefixes."""

    _owners: dict[bytes, int] = field(default_factory=dict)

    def reference(self, request_index: int, prompt: Prompt | None) -> tuple[int, int] | None:
        """(earlier request, tokens shared) for `prompt`, or None when it is stored whole."""
        if not prompt:
            return None
        best: tuple[int, int] | None = None
        keys = list(_block_keys(prompt))
        for block, key in enumerate(keys):
            owner = self._owners.get(key)
            if owner is None:
                break
            best = (owner, (block + 1) * BLOCK_TOKENS)
        if best is None:
            for key in keys:
                self._owners.setdefault(key, request_index)
        return best


def references(prompts: Iterable[tuple[int, Prompt | None]]) -> Iterator[tuple[int, int, int]]:
    """(request, prompt it begins with, tokens shared) for each prompt sharing a first block."""
    shared = SharedPrompts()
    for request_index, prompt in prompts:
        found = shared.reference(request_index, prompt)
        if found is not None:
            yield request_index, *found


def _block_keys(prompt: Prompt) -> Iterator[bytes]:
    """The chained hash of each whole block's prefix: equal keys, equal prefixes."""
    key = b""
    block_bytes = BLOCK_TOKENS * TOKEN_BYTES
    for start in range(0, len(prompt) - block_bytes + 1, block_bytes):
        key = hashlib.sha256(key + prompt[start : start + block_bytes]).digest()
        yield key
