"""Chained hashes of full KV blocks: equal hashes mean equal token prefixes.

Two hashers: stepscope's own (the default) and vLLM's, whose hashes equal those
a vLLM engine computes, so a checkpoint recorded from vLLM can be restored and
compared hash for hash. Either gives the same prefix-cache hits.
"""

from __future__ import annotations

import hashlib
import pickle
from array import array
from collections.abc import Callable, Sequence
from typing import Any

from .cbor import canonical_cbor
from .lora import LoRARequest, lora_hash_key
from .request import BlockHasher, Request

BlockHash = bytes

# Parent of a request's first block; a fixed constant, so hashes never depend on
# PYTHONHASHSEED.
NONE_HASH: BlockHash = hashlib.sha256(b"stepscope-none-hash").digest()

STEPSCOPE_HASHER = "stepscope"
VLLM_HASHERS = ("vllm-sha256", "vllm-sha256_cbor")
"""vLLM's `prefix_caching_hash_algo` values whose hashes stepscope computes, prefixed."""
VLLM_UNREPRODUCIBLE_HASHERS = ("vllm-xxhash", "vllm-xxhash_cbor")
"""vLLM's algorithms that need the `xxhash` package: recorded, replayed with stepscope's."""
BLOCK_HASHERS = (STEPSCOPE_HASHER, *VLLM_HASHERS, *VLLM_UNREPRODUCIBLE_HASHERS)


def vllm_hasher_name(prefix_caching_hash_algo: str) -> str:
    """The `block_hasher` of a vLLM engine with this `prefix_caching_hash_algo`."""
    return f"vllm-{prefix_caching_hash_algo}"


def hash_block_tokens(
    parent_hash: BlockHash, token_ids: Sequence[int], extra_key: bytes = b""
) -> BlockHash:
    """SHA-256 of the parent hash, the block's tokens and the request's extra key.

    vLLM hashes a pickled `(parent, tokens, extra_keys)` tuple; only equality
    matters for prefix hits, so a cheaper canonical encoding gives the same hits.
    """
    return hashlib.sha256(parent_hash + array("q", token_ids).tobytes() + extra_key).digest()


class ChainedBlockHasher:
    """Returns the hashes of a request's newly full blocks, each chained to its parent's.

    With `num_hash_lookahead_tokens` L, each hash also covers the L tokens after its block
    (an EAGLE-style drafter's KV at the block's last position depends on them), so a block
    is hashed only once they exist.
    """

    __slots__ = ("block_size", "num_hash_lookahead_tokens")

    def __init__(self, block_size: int, num_hash_lookahead_tokens: int = 0) -> None:
        self.block_size = block_size
        self.num_hash_lookahead_tokens = num_hash_lookahead_tokens

    def __call__(self, request: Request) -> list[BlockHash]:
        block_size = self.block_size
        lookahead = self.num_hash_lookahead_tokens
        start = len(request.block_hashes) * block_size
        num_tokens = request.num_tokens - lookahead
        if start + block_size > num_tokens:
            return []
        parent = request.block_hashes[-1] if request.block_hashes else NONE_HASH
        tokens = request.all_token_ids
        extra_key = lora_hash_key(request.lora_request)
        new_hashes = []
        while start + block_size <= num_tokens:
            end = start + block_size
            parent = hash_block_tokens(parent, tokens[start : end + lookahead], extra_key)
            new_hashes.append(parent)
            start = end
        return new_hashes


# ----- vLLM's hashes --------------------------------------------------------------

HashFunction = Callable[[Any], bytes]


def sha256(value: Any) -> bytes:
    """vLLM's `sha256`: SHA-256 of the value pickled with the highest protocol."""
    return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def sha256_cbor(value: Any) -> bytes:
    """vLLM's `sha256_cbor`: SHA-256 of the value's canonical CBOR."""
    return hashlib.sha256(canonical_cbor(value)).digest()


_HASH_FUNCTIONS: dict[str, HashFunction] = {
    "vllm-sha256": sha256,
    "vllm-sha256_cbor": sha256_cbor,
}


def vllm_hash_block_tokens(
    hash_function: HashFunction,
    parent_block_hash: BlockHash,
    curr_block_token_ids: Sequence[int],
    extra_keys: tuple[Any, ...] | None,
) -> BlockHash:
    """vLLM's `hash_block_tokens`: the hash of `(parent, tokens, extra_keys)`."""
    return hash_function((parent_block_hash, tuple(curr_block_token_ids), extra_keys))


def vllm_extra_keys(lora_request: LoRARequest | None) -> tuple[Any, ...] | None:
    """vLLM's `generate_block_hash_extra_keys` for the subset: the adapter's, else None.

    Pickle writes one object met twice in a tuple once, so the hash tells a name and a
    path that are one string from two equal strings; `LoRARequest.for_adapter` holds two.
    """
    if lora_request is None:
        return None
    return (("lora", lora_request.lora_name, lora_request.lora_path),)


class VllmBlockHasher:
    """vLLM's `request_block_hasher`, under `none_hash`, with its hash lookahead."""

    __slots__ = ("block_size", "hash_function", "none_hash", "num_hash_lookahead_tokens")

    def __init__(
        self,
        block_size: int,
        hash_function: HashFunction,
        none_hash: BlockHash,
        num_hash_lookahead_tokens: int = 0,
    ) -> None:
        self.block_size = block_size
        self.hash_function = hash_function
        self.none_hash = none_hash
        self.num_hash_lookahead_tokens = num_hash_lookahead_tokens

    def __call__(self, request: Request) -> list[BlockHash]:
        block_size = self.block_size
        lookahead = self.num_hash_lookahead_tokens
        start = len(request.block_hashes) * block_size
        num_tokens = request.num_tokens - lookahead
        parent = request.block_hashes[-1] if request.block_hashes else self.none_hash
        tokens = request.all_token_ids
        extra_keys = vllm_extra_keys(request.lora_request)
        new_hashes = []
        while start + block_size <= num_tokens:
            end = start + block_size
            keys = extra_keys
            if lookahead:
                keys = (extra_keys, *tokens[end : end + lookahead])
            parent = vllm_hash_block_tokens(self.hash_function, parent, tokens[start:end], keys)
            new_hashes.append(parent)
            start = end
        return new_hashes


def is_reproducible(block_hasher: str) -> bool:
    """Whether the engine computes the hashes `block_hasher` names."""
    return block_hasher not in VLLM_UNREPRODUCIBLE_HASHERS


def make_block_hasher(
    block_size: int,
    block_hasher: str = STEPSCOPE_HASHER,
    none_hash: BlockHash | None = None,
    num_hash_lookahead_tokens: int = 0,
) -> BlockHasher:
    """A hasher that returns the hashes of a request's newly full blocks.

    An algorithm the engine cannot compute hashes with stepscope's own: the same hits.
    """
    hash_function = _HASH_FUNCTIONS.get(block_hasher)
    if hash_function is None:
        return ChainedBlockHasher(block_size, num_hash_lookahead_tokens)
    assert none_hash is not None, f"{block_hasher} chains from vLLM's NONE_HASH"
    return VllmBlockHasher(block_size, hash_function, none_hash, num_hash_lookahead_tokens)
