"""Per-request block tables on top of the block pool (vLLM's `KVCacheManager`)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from .block_pool import BlockPool
from .kv_cache_block import KVCacheBlock
from .request import Request, RequestStatus

NO_BLOCKS: tuple[KVCacheBlock, ...] = ()
"""The new blocks of a call that needed none (most running requests, most steps)."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class RefusalCheck(enum.StrEnum):
    """Which capacity check refused an allocation."""

    FULL_SEQUENCE = "full_sequence"
    """The whole current sequence would not fit (`scheduler_reserve_full_isl`)."""
    SLOTS = "slots"
    """The blocks for this step's tokens would not fit."""


@dataclass(frozen=True, slots=True)
class AllocationRefusal:
    """`allocate_slots` could not fit the request; nothing was changed."""

    check: RefusalCheck
    num_blocks_needed: int
    watermark_blocks: int
    num_free_blocks: int


class KVCacheManager:
    """Block tables for a single full-attention KV cache group.

    Block layout of one request during `allocate_slots`::

        | < computed > | < new prefix hits > | < new tokens > | < lookahead > |
                       |            < to be allocated >                      |
                       | < to be cached (full blocks only) > |
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        max_model_len: int,
        *,
        enable_caching: bool,
        watermark_blocks: int = 0,
        use_eagle: bool = False,
        num_reprefillable_tokens: int = 0,
    ) -> None:
        self.block_size = block_size
        self.use_eagle = use_eagle
        """EAGLE-style drafter with plain hashes: a prefix hit drops its last matched block."""
        self.num_reprefillable_tokens = num_reprefillable_tokens
        """The last computed tokens a multi-module MTP drafter may re-prefill: never cached."""
        self.max_model_len = max_model_len
        self.enable_caching = enable_caching
        self.watermark_blocks = watermark_blocks
        self.block_pool = BlockPool(num_blocks, enable_caching=enable_caching)
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}
        self.num_cached_block: dict[str, int] = {}

    @property
    def usage(self) -> float:
        return self.block_pool.get_usage()

    def get_num_free_blocks(self) -> int:
        return self.block_pool.get_num_free_blocks()

    def get_computed_blocks(self, request: Request) -> tuple[list[KVCacheBlock], int]:
        """The longest cached prefix of full blocks, and its length in tokens.

        At most `num_tokens - 1` tokens may hit, since the last token must be
        computed to get logits; a block-aligned fully cached prompt therefore
        recomputes its whole last block. The lookup has no side effects.
        """
        if not self.enable_caching:
            return [], 0
        max_hit_blocks = (request.num_tokens - 1) // self.block_size
        get_cached_block = self.block_pool.get_cached_block
        hit_blocks = []
        for block_hash in request.block_hashes[:max_hit_blocks]:
            block = get_cached_block(block_hash)
            if block is None:
                break
            hit_blocks.append(block)
        if self.use_eagle and hit_blocks:
            hit_blocks.pop()
        return hit_blocks, len(hit_blocks) * self.block_size

    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: Sequence[KVCacheBlock] = (),
        num_lookahead_tokens: int = 0,
        *,
        full_sequence_must_fit: bool = False,
        has_scheduled_reqs: bool = True,
    ) -> list[KVCacheBlock] | AllocationRefusal:
        """Reserve slots for `num_new_tokens` more tokens; return only the new blocks.

        Adopts the prefix-hit blocks first. The watermark applies only to waiting
        or preempted requests, and only while something is running. Registers the
        blocks that become full in the prefix cache (at schedule time).
        """
        if num_new_tokens == 0 and num_new_computed_tokens == 0:
            raise ValueError("num_new_tokens must be greater than 0 when there are no hits")
        request_id = request.request_id
        num_local_computed_tokens = request.num_computed_tokens + num_new_computed_tokens
        total_computed_tokens = min(num_local_computed_tokens, self.max_model_len)
        watermark_blocks = 0
        if has_scheduled_reqs and request.status in (
            RequestStatus.WAITING,
            RequestStatus.PREEMPTED,
        ):
            watermark_blocks = self.watermark_blocks
        num_free_blocks = self.block_pool.get_num_free_blocks()

        if full_sequence_must_fit:
            full_num_tokens = min(request.num_tokens, self.max_model_len)
            needed = self.get_num_blocks_to_allocate(
                request_id, full_num_tokens, new_computed_blocks
            )
            if needed + watermark_blocks > num_free_blocks:
                return AllocationRefusal(
                    RefusalCheck.FULL_SEQUENCE, needed, watermark_blocks, num_free_blocks
                )

        num_tokens_need_slot = min(
            total_computed_tokens + num_new_tokens + num_lookahead_tokens, self.max_model_len
        )
        needed = self.get_num_blocks_to_allocate(
            request_id, num_tokens_need_slot, new_computed_blocks
        )
        if needed + watermark_blocks > num_free_blocks:
            return AllocationRefusal(RefusalCheck.SLOTS, needed, watermark_blocks, num_free_blocks)

        if new_computed_blocks:
            self._add_computed_blocks(request_id, new_computed_blocks)
        new_blocks = self._allocate_new_blocks(request_id, num_tokens_need_slot)
        if self.enable_caching:
            self.cache_blocks(
                request, min(total_computed_tokens + num_new_tokens, request.num_tokens)
            )
        return new_blocks

    def allocate_running_slots(
        self, request: Request, num_new_tokens: int, num_lookahead_tokens: int = 0
    ) -> Sequence[KVCacheBlock] | AllocationRefusal:
        """`allocate_slots` for a running request: no hits to adopt, no watermark, no
        full-sequence check (the running pass's call, made for every request every step).
        """
        request_id = request.request_id
        req_blocks = self.req_to_blocks[request_id]
        num_computed_tokens = request.num_computed_tokens
        num_tokens_need_slot = min(
            num_computed_tokens + num_new_tokens + num_lookahead_tokens, self.max_model_len
        )
        num_new_blocks = -(-num_tokens_need_slot // self.block_size) - len(req_blocks)
        new_blocks: Sequence[KVCacheBlock] = NO_BLOCKS
        if num_new_blocks > 0:
            num_free_blocks = self.block_pool.get_num_free_blocks()
            if num_new_blocks > num_free_blocks:
                return AllocationRefusal(RefusalCheck.SLOTS, num_new_blocks, 0, num_free_blocks)
            new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
            req_blocks.extend(new_blocks)
        if self.enable_caching and len(request.block_hashes) > self.num_cached_block.get(
            request_id, 0
        ):
            num_tokens = min(num_computed_tokens, self.max_model_len) + num_new_tokens
            self.cache_blocks(request, min(num_tokens, request.num_tokens))
        return new_blocks

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[KVCacheBlock] = (),
    ) -> int:
        """Blocks that giving the request `num_tokens` slots takes from the free pool.

        Prefix-hit blocks that are free (ref_cnt 0) count too: touching them takes
        them out of the free queue.
        """
        num_held_blocks = len(self.req_to_blocks.get(request_id, ()))
        num_new_blocks = (
            cdiv(num_tokens, self.block_size) - len(new_computed_blocks) - num_held_blocks
        )
        num_evictable_hits = sum(1 for block in new_computed_blocks if block.ref_cnt == 0)
        return max(num_new_blocks, 0) + num_evictable_hits

    def _add_computed_blocks(self, request_id: str, hit_blocks: Sequence[KVCacheBlock]) -> None:
        assert not self.req_to_blocks.get(request_id), "hits are adopted on admission only"
        self.block_pool.touch(hit_blocks)
        self.req_to_blocks[request_id] = list(hit_blocks)
        self.num_cached_block[request_id] = len(hit_blocks)

    def _allocate_new_blocks(self, request_id: str, num_tokens: int) -> list[KVCacheBlock]:
        req_blocks = self.req_to_blocks.setdefault(request_id, [])
        num_new_blocks = cdiv(num_tokens, self.block_size) - len(req_blocks)
        if num_new_blocks <= 0:
            return []
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
        req_blocks.extend(new_blocks)
        return new_blocks

    def cache_blocks(self, request: Request, num_tokens: int) -> None:
        """Register the request's full, hashed blocks among its first `num_tokens` tokens."""
        request_id = request.request_id
        num_cached_blocks = self.num_cached_block.get(request_id, 0)
        num_hashed_tokens = len(request.block_hashes) * self.block_size
        num_tokens -= self.num_reprefillable_tokens
        num_full_blocks = min(num_tokens, num_hashed_tokens) // self.block_size
        if num_cached_blocks >= num_full_blocks:
            return
        self.block_pool.cache_full_blocks(
            request.block_hashes,
            self.req_to_blocks[request_id],
            num_cached_blocks,
            num_full_blocks,
        )
        self.num_cached_block[request_id] = num_full_blocks

    def free(self, request: Request) -> None:
        """Return the request's blocks, last block first, so its tail is reused first."""
        blocks = self.req_to_blocks.pop(request.request_id, [])
        self.num_cached_block.pop(request.request_id, None)
        self.block_pool.free_blocks(reversed(blocks))

    def get_blocks(self, request_id: str) -> list[KVCacheBlock]:
        """The request's whole block table (prefix hits and allocations)."""
        return self.req_to_blocks.get(request_id, [])

    def get_block_ids(self, request_id: str) -> list[int]:
        return [block.block_id for block in self.req_to_blocks.get(request_id, ())]
