"""The block pool hands out and takes back block ids in vLLM 0.33.0's order."""

from __future__ import annotations

from stepscope.engine.block_pool import BlockPool


def test_block_zero_is_the_null_block_and_never_free() -> None:
    pool = BlockPool(num_gpu_blocks=5, enable_caching=True)
    assert pool.null_block.block_id == 0
    assert pool.free_block_queue.block_ids() == [1, 2, 3, 4]
    assert pool.get_num_free_blocks() == 4
    assert [b.block_id for b in pool.get_new_blocks(2)] == [1, 2]
    assert pool.get_usage() == 0.5


def test_uncached_blocks_go_to_the_front_cached_to_the_back_last_block_first() -> None:
    pool = BlockPool(num_gpu_blocks=8, enable_caching=True)
    b1, b2, b3 = pool.get_new_blocks(3)
    pool.cache_full_blocks([b"h1", b"h2"], [b1, b2, b3], 0, 2)
    pool.free_blocks(reversed([b1, b2, b3]))
    assert pool.free_block_queue.block_ids() == [3, 4, 5, 6, 7, 2, 1]


def test_allocation_evicts_the_hash_of_a_reused_cached_block() -> None:
    pool = BlockPool(num_gpu_blocks=3, enable_caching=True)
    b1, b2 = pool.get_new_blocks(2)
    pool.cache_full_blocks([b"h1", b"h2"], [b1, b2], 0, 2)
    pool.free_blocks([b2, b1])
    assert pool.get_cached_block(b"h2") is b2
    (reused,) = pool.get_new_blocks(1)
    assert reused is b2
    assert pool.get_cached_block(b"h2") is None
    assert reused.block_hash is None
    assert pool.get_cached_block(b"h1") is b1


def test_touch_takes_a_free_cached_block_out_of_the_queue() -> None:
    pool = BlockPool(num_gpu_blocks=4, enable_caching=True)
    b1, b2 = pool.get_new_blocks(2)
    pool.cache_full_blocks([b"h1"], [b1, b2], 0, 1)
    pool.free_blocks([b2, b1])
    assert pool.free_block_queue.block_ids() == [2, 3, 1]
    pool.touch([b1])
    assert b1.ref_cnt == 1
    assert pool.free_block_queue.block_ids() == [2, 3]
    pool.touch([b1])
    assert b1.ref_cnt == 2
    pool.free_blocks([b1])
    assert pool.get_num_free_blocks() == 2


def test_duplicate_hashes_resolve_to_the_earliest_cached_block() -> None:
    pool = BlockPool(num_gpu_blocks=4, enable_caching=True)
    b1, b2 = pool.get_new_blocks(2)
    pool.cache_full_blocks([b"same"], [b1], 0, 1)
    pool.cache_full_blocks([b"same"], [b2], 0, 1)
    assert pool.get_cached_block(b"same") is b1
    pool.free_blocks([b1])
    pool.get_new_blocks(2)  # block 3, then block 1 (evicted)
    assert pool.get_cached_block(b"same") is b2


def test_without_caching_freed_blocks_all_go_to_the_front() -> None:
    pool = BlockPool(num_gpu_blocks=6, enable_caching=False)
    blocks = pool.get_new_blocks(3)
    pool.free_blocks(reversed(blocks))
    assert pool.free_block_queue.block_ids() == [3, 2, 1, 4, 5]
