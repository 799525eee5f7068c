"""Chained hashes of full KV blocks: equal hashes mean equal token prefixes."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence

from .lora import lora_hash_key
from .request import Request

BlockHash = bytes

# Parent of a request's first block; a fixed constant, so hashes never depend on
# PYTHONHASHSEED (vLLM derives its NONE_HASH the same way, from a fixed seed).
NONE_HASH: BlockHash = hashlib.sha256(b"stepscope-none-hash").digest()


def hash_block_tokens(
    parent_hash: BlockHash, token_ids: Sequence[int], extra_key: bytes = b""
) -> BlockHash:
    """SHA-256 of the parent hash, the block's tokens and the request's extra key.

    vLLM hashes a pickled `(parent, tokens, extra_keys)` tuple; only equality
    matters for prefix hits, so a cheaper canonical encoding gives the same hits.
    """
    return hashlib.sha256(parent_hash + array("q", token_ids).tobytes() + extra_key).digest()


class ChainedBlockHasher:
    """Returns the hashes of a request's newly full blocks, each chained to its parent's."""

    __slots__ = ("block_size",)

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size

    def __call__(self, request: Request) -> list[BlockHash]:
        block_size = self.block_size
        start = len(request.block_hashes) * block_size
        num_tokens = request.num_tokens
        if start + block_size > num_tokens:
            return []
        parent = request.block_hashes[-1] if request.block_hashes else NONE_HASH
        tokens = request.all_token_ids
        extra_key = lora_hash_key(request.lora_request)
        new_hashes = []
        while start + block_size <= num_tokens:
            parent = hash_block_tokens(parent, tokens[start : start + block_size], extra_key)
            new_hashes.append(parent)
            start += block_size
        return new_hashes


def make_block_hasher(block_size: int) -> ChainedBlockHasher:
    """A hasher that returns the hashes of a request's newly full blocks."""
    return ChainedBlockHasher(block_size)
