"""The prefix cache's index: block hash -> the cached blocks with that hash.

As vLLM's `BlockHashToBlockMap`: a hash held by one block maps to the block itself,
and only a hash held by several (block tables are append-only, so equal blocks are
not de-duplicated) gets a dict of them by block id. Most hashes have one block, so
the cache keeps no dict per cached block: less memory, and fewer containers for the
garbage collector to walk.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter

from .block_hash import BlockHash
from .kv_cache_block import KVCacheBlock

_block_id = attrgetter("block_id")


class BlockHashToBlockMap:
    def __init__(self) -> None:
        self._cache: dict[BlockHash, KVCacheBlock | dict[int, KVCacheBlock]] = {}

    def get_one_block(self, block_hash: BlockHash) -> KVCacheBlock | None:
        """The earliest inserted block still cached under `block_hash`, if any."""
        blocks = self._cache.get(block_hash)
        if blocks is None or not isinstance(blocks, dict):
            return blocks
        return next(iter(blocks.values()))

    def insert(self, block_hash: BlockHash, block: KVCacheBlock) -> None:
        blocks = self._cache.get(block_hash)
        if blocks is None:
            self._cache[block_hash] = block
        elif isinstance(blocks, dict):
            blocks[block.block_id] = block
        else:
            self._cache[block_hash] = {blocks.block_id: blocks, block.block_id: block}

    def pop(self, block_hash: BlockHash, block_id: int) -> KVCacheBlock | None:
        """Take block `block_id` out from under `block_hash`; None if it is not there.

        As vLLM's: the hash is taken out and put back if it keeps blocks, so it moves to
        the end of the index's order (which no decision reads, but a checkpoint keeps).
        """
        blocks = self._cache.pop(block_hash, None)
        if blocks is None:
            return None
        if not isinstance(blocks, dict):
            if blocks.block_id == block_id:
                return blocks
            self._cache[block_hash] = blocks
            return None
        block = blocks.pop(block_id, None)
        if blocks:
            self._cache[block_hash] = blocks
        return block

    def blocks(self, block_hash: BlockHash) -> tuple[KVCacheBlock, ...]:
        """Every block cached under `block_hash`, earliest inserted first."""
        blocks = self._cache.get(block_hash)
        if blocks is None:
            return ()
        return tuple(blocks.values()) if isinstance(blocks, dict) else (blocks,)

    def block_ids(self) -> tuple[int, ...]:
        """Every cached block's id, hashes in insertion order and, of blocks sharing a hash,
        the earliest inserted first (the order a checkpoint keeps)."""
        try:  # most hashes have one block: one pass at C speed
            return tuple(map(_block_id, self._cache.values()))
        except AttributeError:  # a hash held by several blocks maps to a dict of them
            pass
        ids: list[int] = []
        for blocks in self._cache.values():
            if isinstance(blocks, dict):
                ids.extend(blocks)
            else:
                ids.append(blocks.block_id)
        return tuple(ids)

    def __iter__(self) -> Iterator[BlockHash]:
        return iter(self._cache)
