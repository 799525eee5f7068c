"""One KV cache group's block tables, by attention type (vLLM's `single_type_kv_cache_manager`).

Every group keeps one table entry per block position; an entry whose tokens left the
attention window holds the null block (id 0) and its block goes back to the shared pool.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import cached_property

from .block_hash import BlockHash
from .block_pool import BlockPool
from .kv_cache_block import KVCacheBlock
from .kv_cache_groups import AttentionType, KVCacheGroupSpec, cdiv
from .request import Request

HitBlocks = list[list[KVCacheBlock]]
"""A lookup's hit blocks, one list per group of a spec (nulls where a window skips)."""


def group_suffix(group_id: int) -> bytes:
    """What a group's prefix-cache keys add to a block hash (vLLM's
    `make_block_hash_with_group_id`)."""
    return group_id.to_bytes(4, "big")


def group_suffixes(group_ids: Sequence[int]) -> tuple[bytes, ...]:
    return tuple(map(group_suffix, group_ids))


class SingleTypeKVCacheManager:
    """Block tables of one full-attention group; windowed types override the window rules."""

    def __init__(
        self,
        spec: KVCacheGroupSpec,
        group_id: int,
        block_pool: BlockPool,
        block_size: int,
        *,
        enable_caching: bool,
        max_admission_blocks_per_request: int | None,
        extra_retained_tokens: int = 0,
    ) -> None:
        self.spec = spec
        self.extra_retained_tokens = extra_retained_tokens
        """Tokens a sliding window keeps below itself (multi-module MTP re-prefills them)."""
        self.group_id = group_id
        self.block_pool = block_pool
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.max_admission_blocks_per_request = max_admission_blocks_per_request
        self.null_block = block_pool.null_block
        self.hash_suffix = group_suffix(group_id)
        self.cached_blocks = block_pool.cached_block_hash_to_block
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}
        self.num_cached_block: dict[str, int] = {}
        self.num_tokens_next_skip: dict[str, int] = {}
        """Per request, the fewest processed tokens at which `remove_skipped_blocks` could free
        a block it has not freed yet; the running pass calls it only from there."""
        self.num_held_blocks = 0
        """Distinct blocks in this group's tables, null entries left out: those its calls took
        from the pool's free queue less those they returned (block ids are unique across
        groups, so no other group's call moves one of them)."""

    # ----- counting and allocating ---------------------------------------------------

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Tokens before the attention window of the next token (full attention: none)."""
        return 0

    def num_tokens_to_skip(self, num_blocks: int) -> int:
        """The fewest computed tokens whose window leaves `num_blocks` whole blocks behind."""
        return sys.maxsize  # full attention keeps every block

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[KVCacheBlock],
        total_computed_tokens: int,
        *,
        apply_admission_cap: bool = False,
    ) -> int:
        """Blocks that giving the request `num_tokens` slots takes from the free pool."""
        num_required_blocks = cdiv(num_tokens, self.block_size)
        cap = self.max_admission_blocks_per_request
        if apply_admission_cap and cap is not None:
            num_required_blocks = min(num_required_blocks, cap)
        num_req_blocks = len(self.req_to_blocks.get(request_id, ()))
        if request_id in self.num_cached_block:
            return max(num_required_blocks - num_req_blocks, 0)
        num_skipped_blocks = self.get_num_skipped_tokens(total_computed_tokens) // self.block_size
        num_local_computed_blocks = len(new_computed_blocks) + num_req_blocks
        num_new_blocks = max(
            num_required_blocks - max(num_skipped_blocks, num_local_computed_blocks), 0
        )
        num_skipped_new_computed = max(0, num_skipped_blocks - num_req_blocks)
        num_evictable = sum(
            1
            for block in new_computed_blocks[num_skipped_new_computed:]
            if block.ref_cnt == 0 and block is not self.null_block
        )
        return num_new_blocks + num_evictable

    def add_local_computed_blocks(
        self, request_id: str, new_computed_blocks: Sequence[KVCacheBlock], num_tokens: int
    ) -> None:
        """Adopt a prefix hit's blocks; those below the window become null entries."""
        num_skipped_blocks = self.get_num_skipped_tokens(num_tokens) // self.block_size
        kept = list(new_computed_blocks[num_skipped_blocks:])
        num_free_blocks = self.block_pool.get_num_free_blocks()
        self.block_pool.touch([block for block in kept if block is not self.null_block])
        self._count_held_blocks(num_free_blocks)
        req_blocks = self.req_to_blocks.setdefault(request_id, [])
        assert not req_blocks, "hits are adopted on admission only"
        req_blocks.extend([self.null_block] * num_skipped_blocks)
        req_blocks.extend(kept)
        self.num_cached_block[request_id] = len(req_blocks)

    def allocate_new_blocks(self, request_id: str, num_tokens: int) -> list[KVCacheBlock]:
        req_blocks = self.req_to_blocks.setdefault(request_id, [])
        num_new_blocks = cdiv(num_tokens, self.block_size) - len(req_blocks)
        if num_new_blocks <= 0:
            return []
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
        self.num_held_blocks += num_new_blocks
        req_blocks.extend(new_blocks)
        return new_blocks

    # ----- freeing ---------------------------------------------------------------------

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> None:
        """Free the blocks wholly before the window and null their entries, tail first."""
        blocks = self.req_to_blocks.get(request_id)
        if not blocks:
            return  # nothing held yet: a request being admitted
        last = self.get_num_skipped_tokens(num_computed_tokens) // self.block_size - 1
        if last >= len(blocks):
            last = len(blocks) - 1
        # Entries up to `last` are null once this returns: the next block to free is after it.
        self.num_tokens_next_skip[request_id] = self.num_tokens_to_skip(last + 2)
        null_block = self.null_block
        if last < 0 or blocks[last] is null_block:
            return  # freed up to here already
        freed: list[KVCacheBlock] = []
        for index in range(last, -1, -1):
            if blocks[index] is null_block:
                break
            freed.append(blocks[index])
            blocks[index] = null_block
        num_free_blocks = self.block_pool.get_num_free_blocks()
        self.block_pool.free_blocks(freed)
        self._count_held_blocks(num_free_blocks)

    def free(self, request_id: str) -> None:
        """Return the request's blocks, last first (null entries are never pooled)."""
        blocks = self.req_to_blocks.pop(request_id, [])
        self.num_cached_block.pop(request_id, None)
        self.num_tokens_next_skip.pop(request_id, None)
        null_block = self.null_block
        num_free_blocks = self.block_pool.get_num_free_blocks()
        self.block_pool.free_blocks(b for b in reversed(blocks) if b is not null_block)
        self._count_held_blocks(num_free_blocks)

    def _count_held_blocks(self, num_free_blocks_before: int) -> None:
        """Blocks the pool call just made took from the free queue (or gave back) are held
        (or no longer held) by this group."""
        self.num_held_blocks += num_free_blocks_before - self.block_pool.get_num_free_blocks()

    # ----- prefix caching --------------------------------------------------------------

    def cache_blocks(
        self,
        request: Request,
        num_tokens: int,
        retention_interval: int | None,
        reachable_boundaries: Sequence[int],
    ) -> None:
        """Register the request's full blocks among its first `num_tokens` tokens."""
        request_id = request.request_id
        num_cached_blocks = self.num_cached_block.get(request_id, 0)
        num_hashed_tokens = len(request.block_hashes) * self.block_size
        num_full_blocks = min(num_tokens, num_hashed_tokens) // self.block_size
        if num_cached_blocks >= num_full_blocks:
            return
        indices = self.reachable_block_indices(
            num_cached_blocks, num_full_blocks, retention_interval, reachable_boundaries
        )
        blocks = self.req_to_blocks[request_id]
        block_hashes = request.block_hashes
        suffix, null_block = self.hash_suffix, self.null_block
        for index in indices:
            block = blocks[index]
            if block is not null_block:
                self.block_pool.cache_block(block_hashes[index] + suffix, block)
        self.num_cached_block[request_id] = num_full_blocks

    def reachable_block_indices(
        self,
        start_block: int,
        end_block: int,
        retention_interval: int | None,
        reachable_boundaries: Sequence[int],
    ) -> Sequence[int]:
        """Which of blocks `start_block..end_block` a later hit could use (all of them)."""
        return range(start_block, end_block)

    def find_longest_cache_hit(
        self, block_hashes: Sequence[BlockHash], max_length: int, group_ids: Sequence[int]
    ) -> tuple[HitBlocks, int]:
        """The longest run of cached blocks from the start, for every group in `group_ids`."""
        if len(group_ids) == 1:
            return self._find_longest_hit_one_group(block_hashes, max_length, group_ids[0])
        suffixes = group_suffixes(group_ids)
        computed: HitBlocks = [[] for _ in group_ids]
        get_cached_blocks = self.get_cached_blocks
        for block_hash in block_hashes[: max_length // self.block_size]:
            cached = get_cached_blocks(block_hash, suffixes)
            if cached is None:
                break
            for blocks, block in zip(computed, cached, strict=True):
                blocks.append(block)
        return computed, len(computed[0]) * self.block_size

    def _find_longest_hit_one_group(
        self, block_hashes: Sequence[BlockHash], max_length: int, group_id: int
    ) -> tuple[HitBlocks, int]:
        """`find_longest_cache_hit` for a spec only one group has (the common case)."""
        suffix = group_suffix(group_id)
        get_one_block = self.cached_blocks.get_one_block
        hit: list[KVCacheBlock] = []
        for block_hash in block_hashes[: max_length // self.block_size]:
            block = get_one_block(block_hash + suffix)
            if block is None:
                break
            hit.append(block)
        return [hit], len(hit) * self.block_size

    def get_cached_blocks(
        self, block_hash: BlockHash, suffixes: Sequence[bytes]
    ) -> list[KVCacheBlock] | None:
        """The block cached under `block_hash` in each group (its key's suffix), or None if
        one group misses."""
        get_one_block = self.cached_blocks.get_one_block
        cached = []
        for suffix in suffixes:
            block = get_one_block(block_hash + suffix)
            if block is None:
                return None
            cached.append(block)
        return cached


FullAttentionManager = SingleTypeKVCacheManager


class SlidingWindowManager(SingleTypeKVCacheManager):
    """A sliding window of `sliding_window` tokens (plus `extra_retained_tokens` kept below)."""

    @cached_property
    def sliding_window(self) -> int:
        assert self.spec.sliding_window is not None
        return self.spec.sliding_window

    @cached_property
    def num_contiguous_blocks_for_hit(self) -> int:
        """Cached blocks a hit needs right before its end: the window's tokens before it."""
        return cdiv(self.sliding_window - 1, self.block_size)

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        skipped = num_computed_tokens - self.sliding_window + 1 - self.extra_retained_tokens
        return skipped if skipped > 0 else 0

    def num_tokens_to_skip(self, num_blocks: int) -> int:
        return num_blocks * self.block_size + self.sliding_window - 1 + self.extra_retained_tokens

    def find_longest_cache_hit(
        self, block_hashes: Sequence[BlockHash], max_length: int, group_ids: Sequence[int]
    ) -> tuple[HitBlocks, int]:
        """The rightmost run of enough contiguous cached blocks (or a run from block 0)."""
        max_num_blocks = max_length // self.block_size
        computed: HitBlocks = [[self.null_block] * max_num_blocks for _ in group_ids]
        suffixes = group_suffixes(group_ids)
        need = self.num_contiguous_blocks_for_hit
        num_contiguous = 0
        for index in range(max_num_blocks - 1, -1, -1):
            cached = self.get_cached_blocks(block_hashes[index], suffixes)
            if cached is None:
                num_contiguous = 0
                continue
            for blocks, block in zip(computed, cached, strict=True):
                blocks[index] = block
            num_contiguous += 1
            if num_contiguous >= need:
                for blocks in computed:
                    del blocks[index + num_contiguous :]
                return computed, len(computed[0]) * self.block_size
        for blocks in computed:
            del blocks[num_contiguous:]
        return computed, len(computed[0]) * self.block_size

    def reachable_block_indices(
        self,
        start_block: int,
        end_block: int,
        retention_interval: int | None,
        reachable_boundaries: Sequence[int],
    ) -> Sequence[int]:
        """The tails a hit can end on: every segment's (retention interval) and each
        reachable boundary's (replay boundary, junction); all of them under dense retention."""
        need = self.num_contiguous_blocks_for_hit
        block_size = self.block_size
        segment_tokens = block_size if retention_interval is None else retention_interval
        reachable: set[int] = set()
        if segment_tokens:
            per_segment = segment_tokens // block_size
            if need >= per_segment:
                return range(start_block, end_block)
            first_kept = per_segment - need
            reachable.update(
                i for i in range(start_block, end_block) if i % per_segment >= first_kept
            )
        if retention_interval is not None:
            for boundary in reachable_boundaries:
                end = boundary // block_size
                reachable.update(range(max(start_block, end - need), min(end_block, end)))
        return sorted(reachable)


class ChunkedLocalAttentionManager(SingleTypeKVCacheManager):
    """Chunked local attention: a token attends within its `attention_chunk_size` chunk."""

    @cached_property
    def attention_chunk_size(self) -> int:
        assert self.spec.attention_chunk_size is not None
        return self.spec.attention_chunk_size

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        return num_computed_tokens // self.attention_chunk_size * self.attention_chunk_size

    def num_tokens_to_skip(self, num_blocks: int) -> int:
        return cdiv(num_blocks * self.block_size, self.attention_chunk_size) * (
            self.attention_chunk_size
        )

    def find_longest_cache_hit(
        self, block_hashes: Sequence[BlockHash], max_length: int, group_ids: Sequence[int]
    ) -> tuple[HitBlocks, int]:
        """Blocks before the last chunk boundary are null; the rest must be cached."""
        max_num_blocks = max_length // self.block_size
        chunk_start = max_length // self.attention_chunk_size * self.attention_chunk_size
        first_block = chunk_start // self.block_size
        computed: HitBlocks = [[self.null_block] * first_block for _ in group_ids]
        suffixes = group_suffixes(group_ids)
        for index in range(first_block, max_num_blocks):
            cached = self.get_cached_blocks(block_hashes[index], suffixes)
            if cached is None:
                break
            for blocks, block in zip(computed, cached, strict=True):
                blocks.append(block)
        return computed, len(computed[0]) * self.block_size


_MANAGERS: dict[AttentionType, type[SingleTypeKVCacheManager]] = {
    AttentionType.FULL: FullAttentionManager,
    AttentionType.SLIDING_WINDOW: SlidingWindowManager,
    AttentionType.CHUNKED_LOCAL: ChunkedLocalAttentionManager,
}


def manager_class(spec: KVCacheGroupSpec) -> type[SingleTypeKVCacheManager]:
    return _MANAGERS[spec.type]
