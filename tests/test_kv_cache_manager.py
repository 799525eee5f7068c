"""`get_computed_blocks` and `allocate_slots`: hits, the full-sequence check, the watermark."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from stepscope.engine import AllocationRefusal, Request, RequestStatus, SamplingParams
from stepscope.engine.block_hash import make_block_hasher
from stepscope.engine.kv_cache_manager import KVCacheManager, RefusalCheck

BLOCK_SIZE = 4


def _manager(num_blocks: int = 11, watermark_blocks: int = 0) -> KVCacheManager:
    return KVCacheManager(
        num_blocks, BLOCK_SIZE, 64, enable_caching=True, watermark_blocks=watermark_blocks
    )


def _request(request_id: str, prompt: list[int]) -> Request:
    return Request(
        request_id,
        prompt,
        SamplingParams(max_tokens=8),
        0.0,
        block_hasher=make_block_hasher(BLOCK_SIZE),
    )


def _admit(manager: KVCacheManager, request: Request) -> list[int]:
    hits, num_hit = manager.get_computed_blocks(request)
    result = manager.allocate_slots(
        request, request.num_tokens - num_hit, num_hit, hits, full_sequence_must_fit=True
    )
    assert not isinstance(result, AllocationRefusal)
    request.status = RequestStatus.RUNNING
    request.num_computed_tokens = request.num_tokens
    return manager.get_block_ids(request.request_id)


def test_hit_is_capped_one_token_short_so_a_whole_block_is_recomputed() -> None:
    manager = _manager()
    first = _request("a", list(range(8)))
    _admit(manager, first)
    same = _request("b", list(range(8)))
    hits, num_hit = manager.get_computed_blocks(same)
    assert num_hit == 4 and [b.block_id for b in hits] == [1]
    longer = _request("c", list(range(9)))
    assert manager.get_computed_blocks(longer)[1] == 8


def test_hit_stops_at_the_first_missing_block() -> None:
    manager = _manager()
    _admit(manager, _request("a", list(range(12))))
    diverged = _request("b", [0, 1, 2, 3, 99, 5, 6, 7, 8, 9, 10, 11, 12])
    assert manager.get_computed_blocks(diverged)[1] == 4


def test_free_evictable_hits_count_against_the_free_pool() -> None:
    manager = _manager(num_blocks=4)  # 3 usable
    first = _request("a", list(range(9)))
    _admit(manager, first)  # blocks 1, 2 cached; 3 partial
    manager.free(first)
    second = _request("b", [*range(9), 50, 51, 52])
    hits, num_hit = manager.get_computed_blocks(second)
    assert num_hit == 8
    # 3 blocks for 12 tokens: 2 hits (both free, so they cost a block each) + 1 new.
    assert manager.get_num_blocks_to_allocate("b", 12, hits) == 3


def test_full_sequence_check_refuses_what_a_first_chunk_would_fit() -> None:
    manager = _manager(num_blocks=4)
    request = _request("a", list(range(16)))
    refusal = manager.allocate_slots(request, 4, full_sequence_must_fit=True)
    assert isinstance(refusal, AllocationRefusal)
    assert refusal.check is RefusalCheck.FULL_SEQUENCE
    assert refusal.num_blocks_needed == 4 and refusal.num_free_blocks == 3
    assert manager.get_num_free_blocks() == 3
    assert manager.allocate_slots(request, 4, full_sequence_must_fit=False) == [
        manager.block_pool.blocks[1]
    ]


def test_watermark_applies_to_waiting_requests_only_while_something_runs() -> None:
    manager = _manager(num_blocks=5, watermark_blocks=2)  # 4 usable
    request = _request("a", list(range(12)))
    refusal = manager.allocate_slots(request, 12, has_scheduled_reqs=True)
    assert isinstance(refusal, AllocationRefusal) and refusal.watermark_blocks == 2
    assert not isinstance(
        manager.allocate_slots(request, 12, has_scheduled_reqs=False), AllocationRefusal
    )
    request.status = RequestStatus.RUNNING
    request.num_computed_tokens = 12
    # 1 block left, and a running request pays no watermark.
    assert len(manager.allocate_slots(request, 1)) == 1


def test_blocks_are_cached_at_schedule_time_for_the_scheduled_tokens() -> None:
    manager = _manager()
    request = _request("a", list(range(10)))
    manager.allocate_slots(request, 6)
    assert [b.block_hash is not None for b in manager.get_blocks("a")] == [True, False]


@given(
    prompt_len=st.integers(1, 30),
    chunks=st.lists(st.integers(1, 9), min_size=1, max_size=6),
    num_lookahead_tokens=st.integers(0, 3),
    num_blocks=st.integers(3, 14),
)
def test_the_running_pass_call_decides_as_allocate_slots(
    prompt_len: int, chunks: list[int], num_lookahead_tokens: int, num_blocks: int
) -> None:
    """`allocate_running_slots` is `allocate_slots` for a running request: the same grants,
    refusals, block tables, cached blocks and free pool, chunk after chunk."""
    general, running = _manager(num_blocks), _manager(num_blocks)
    a, b = (_request("a", list(range(prompt_len))) for _ in range(2))
    for manager, request in ((general, a), (running, b)):
        assert not isinstance(manager.allocate_slots(request, 1), AllocationRefusal)
        request.status = RequestStatus.RUNNING
        _advance(request, 1)
    for chunk in chunks:
        num_new_tokens = min(chunk, a.num_tokens - a.num_computed_tokens)
        expected = general.allocate_slots(
            a, num_new_tokens, num_lookahead_tokens=num_lookahead_tokens
        )
        got = running.allocate_running_slots(b, num_new_tokens, num_lookahead_tokens)
        if isinstance(expected, AllocationRefusal):
            assert got == expected
            return
        assert not isinstance(got, AllocationRefusal)
        assert [block.block_id for block in got] == [block.block_id for block in expected]
        _advance(a, num_new_tokens)
        _advance(b, num_new_tokens)
        assert general.get_block_ids("a") == running.get_block_ids("a")
        assert general.num_cached_block == running.num_cached_block
        assert general.get_num_free_blocks() == running.get_num_free_blocks()


def _advance(request: Request, num_tokens: int) -> None:
    """Its tokens computed; once it has caught up, a sampled token appended (it decodes)."""
    request.num_computed_tokens += num_tokens
    if request.num_computed_tokens == request.num_tokens:
        request.append_output_token_id(7)
