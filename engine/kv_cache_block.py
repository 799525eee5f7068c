"""One KV cache block: its id, its holders, its hash once cached (vLLM's `KVCacheBlock`)."""

from __future__ import annotations

from .block_hash import BlockHash


class KVCacheBlock:
    """One block of `block_size` KV slots; `block_hash` is set once it is cached."""

    __slots__ = ("block_hash", "block_id", "ref_cnt")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self.block_hash: BlockHash | None = None

    def __repr__(self) -> str:
        cached = "cached" if self.block_hash is not None else "uncached"
        return f"KVCacheBlock({self.block_id}, ref_cnt={self.ref_cnt}, {cached})"
