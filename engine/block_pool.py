"""KV blocks, the free queue and the prefix-cache map (vLLM's `BlockPool`)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

from .block_hash import BlockHash
from .block_hash_map import BlockHashToBlockMap
from .kv_cache_block import KVCacheBlock


class FreeKVCacheBlockQueue:
    """Free blocks in eviction order: allocation pops the front.

    vLLM keeps a doubly linked list; an `OrderedDict` keyed by block id gives the
    same O(1) pop-front, push-front, push-back and remove-from-the-middle.
    """

    def __init__(self, blocks: Iterable[KVCacheBlock]) -> None:
        self._queue: OrderedDict[int, KVCacheBlock] = OrderedDict(
            (block.block_id, block) for block in blocks
        )

    def __len__(self) -> int:
        return len(self._queue)

    def popleft(self) -> KVCacheBlock:
        return self._queue.popitem(last=False)[1]

    def popleft_n(self, num_blocks: int) -> list[KVCacheBlock]:
        popitem = self._queue.popitem
        return [popitem(last=False)[1] for _ in range(num_blocks)]

    def remove(self, block: KVCacheBlock) -> None:
        del self._queue[block.block_id]

    def append_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        for block in blocks:
            self._queue[block.block_id] = block

    def prepend_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put `blocks` at the front, keeping their order (the first is popped first)."""
        for block in reversed(blocks):
            self._queue[block.block_id] = block
            self._queue.move_to_end(block.block_id, last=False)

    def block_ids(self) -> list[int]:
        """Free block ids, front (next to be allocated) first."""
        return list(self._queue)


class BlockPool:
    """Hands out, frees and caches blocks exactly as vLLM 0.33.0's `BlockPool`.

    Block 0 is the null block: never handed out, freed or counted as free.
    Freed blocks without a hash go to the front of the free queue (reused first);
    cached ones go to the back and stay hit-able until evicted by allocation.
    """

    def __init__(self, num_gpu_blocks: int, *, enable_caching: bool) -> None:
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.blocks = [KVCacheBlock(block_id) for block_id in range(num_gpu_blocks)]
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        self.null_block = self.free_block_queue.popleft()
        # Several blocks may share a hash (no de-duplication: block tables are
        # append-only); a lookup returns the earliest inserted one still cached.
        self.cached_block_hash_to_block = BlockHashToBlockMap()

    def get_cached_block(self, block_hash: BlockHash) -> KVCacheBlock | None:
        return self.cached_block_hash_to_block.get_one_block(block_hash)

    def cache_full_blocks(
        self,
        block_hashes: Sequence[BlockHash],
        blocks: Sequence[KVCacheBlock],
        num_cached_blocks: int,
        num_full_blocks: int,
    ) -> None:
        """Register `blocks[num_cached_blocks:num_full_blocks]` under their hashes."""
        for index in range(num_cached_blocks, num_full_blocks):
            block = blocks[index]
            block_hash = block_hashes[index]
            assert block.block_hash is None, f"block {block.block_id} is already cached"
            block.block_hash = block_hash
            self.cached_block_hash_to_block.insert(block_hash, block)

    def cache_block(self, block_hash: BlockHash, block: KVCacheBlock) -> None:
        """Register one block under `block_hash` (a hybrid group's key)."""
        assert block.block_hash is None, f"block {block.block_id} is already cached"
        block.block_hash = block_hash
        self.cached_block_hash_to_block.insert(block_hash, block)

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Pop `num_blocks` from the front of the free queue, evicting cached ones."""
        if num_blocks > len(self.free_block_queue):
            raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
        blocks = self.free_block_queue.popleft_n(num_blocks)
        for block in blocks:
            if block.block_hash is not None:
                self._evict(block)
            block.ref_cnt = 1
        return blocks

    def _evict(self, block: KVCacheBlock) -> None:
        assert block.block_hash is not None
        evicted = self.cached_block_hash_to_block.pop(block.block_hash, block.block_id)
        assert evicted is block, f"block {block.block_id} was not cached under its hash"
        block.block_hash = None

    def touch(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Take a reference on prefix-hit blocks, pulling free ones out of the queue."""
        for block in blocks:
            if block.ref_cnt == 0:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """Drop one reference per block; blocks reaching zero return to the queue."""
        evict_first: list[KVCacheBlock] = []
        evict_last: list[KVCacheBlock] = []
        for block in ordered_blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                if block.block_hash is None or not self.enable_caching:
                    evict_first.append(block)
                else:
                    evict_last.append(block)
        self.free_block_queue.prepend_n(evict_first)
        self.free_block_queue.append_n(evict_last)

    def get_num_free_blocks(self) -> int:
        """Free blocks, cached-but-evictable ones included."""
        return len(self.free_block_queue)

    def get_usage(self) -> float:
        """Fraction of usable blocks (null block excluded) that are held."""
        return 1.0 - len(self.free_block_queue) / (self.num_gpu_blocks - 1)
