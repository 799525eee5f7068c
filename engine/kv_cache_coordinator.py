"""Block tables of several KV cache groups over one block pool (vLLM's `KVCacheCoordinator`).

A hybrid model (sliding window or chunked local attention beside full attention) keeps
one table per group; every group draws from the same pool, so block ids are unique
across groups. With prefix caching this is vLLM's `HybridKVCacheCoordinator`, without it
`KVCacheCoordinatorNoPrefixCache`. The scheduler sees the same calls as on
`KVCacheManager`; the new blocks it gets are group 0's, the others are kept per step.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence

from .block_pool import BlockPool
from .kv_cache_block import KVCacheBlock
from .kv_cache_groups import AttentionType, KVCacheGroupSpec, cdiv
from .kv_cache_manager import AllocationRefusal, RefusalCheck
from .request import Request, RequestStatus
from .single_type_kv_cache_manager import SingleTypeKVCacheManager, manager_class

GroupBlocks = tuple[Sequence[KVCacheBlock], ...]
"""One sequence of blocks per KV cache group, in group order."""


class KVCacheCoordinator:
    """Allocates, frees and caches the blocks of every KV cache group of a request."""

    def __init__(
        self,
        groups: Sequence[KVCacheGroupSpec],
        num_blocks: int,
        block_size: int,
        max_model_len: int,
        *,
        enable_caching: bool,
        max_in_flight_tokens: int,
        watermark_blocks: int = 0,
        retention_interval: int | None = 0,
        extra_retained_tokens: int = 0,
        num_reprefillable_tokens: int = 0,
    ) -> None:
        self.block_size = block_size
        self.max_model_len = max_model_len
        self.enable_caching = enable_caching
        self.watermark_blocks = watermark_blocks
        self.retention_interval = retention_interval
        self.num_reprefillable_tokens = num_reprefillable_tokens if len(groups) == 1 else 0
        """Unitary coordinator only: the last computed tokens MTP may re-prefill, not cached."""
        self.block_pool = BlockPool(num_blocks, enable_caching=enable_caching)
        self.managers = tuple(
            manager_class(spec)(
                spec,
                group_id,
                self.block_pool,
                block_size,
                enable_caching=enable_caching,
                max_admission_blocks_per_request=spec.max_admission_blocks_per_request(
                    block_size, max_in_flight_tokens, max_model_len, extra_retained_tokens
                ),
                extra_retained_tokens=extra_retained_tokens,
            )
            for group_id, spec in enumerate(groups)
        )
        self.spec_groups = _spec_groups(groups)
        self._full_then_one_other = len(self.spec_groups) == 2 and _is_full(
            self.managers[self.spec_groups[0][0]]
        )
        self.windowed_managers = tuple(m for m in self.managers if not _is_full(m))
        """The groups whose tables drop blocks that leave the window (not full attention)."""
        # The running pass's lookups, bound once (it runs for every request every step).
        self._tables = tuple(manager.req_to_blocks for manager in self.managers)
        self._num_cached_blocks = tuple(manager.num_cached_block for manager in self.managers)
        self._window_skips = tuple(
            (manager.num_tokens_next_skip, manager.remove_skipped_blocks)
            for manager in self.windowed_managers
        )
        self.no_hits: GroupBlocks = tuple(() for _ in groups)
        self.no_block_ids: tuple[tuple[int, ...], ...] = tuple(() for _ in groups)
        self._step_new_blocks: dict[str, GroupBlocks] = {}
        """This step's allocations that gave blocks, by request (its last, if several)."""

    @property
    def usage(self) -> float:
        return self.block_pool.get_usage()

    def get_num_free_blocks(self) -> int:
        return self.block_pool.get_num_free_blocks()

    # ----- prefix-cache lookup ---------------------------------------------------------

    def get_computed_blocks(self, request: Request) -> tuple[GroupBlocks, int]:
        """The longest prefix every group can serve, its blocks per group, and its length.

        Records on the request the longer full-attention hit, if any (its junction).
        """
        if not self.enable_caching:
            request.shared_prefix_boundary = 0
            return self.no_hits, 0
        blocks, hit_length, num_uncached = self._find_longest_cache_hit(
            request.block_hashes, request.num_tokens - 1
        )
        request.shared_prefix_boundary = hit_length + num_uncached if num_uncached else 0
        return blocks, hit_length

    def _find_longest_cache_hit(
        self, block_hashes: Sequence[bytes], max_length: int
    ) -> tuple[GroupBlocks, int, int]:
        """vLLM's fixed point: each spec in turn (full attention first) accepts the length or
        shortens it, until none shortens it. Returns the blocks, the length and how far
        the longest single-spec hit went beyond it."""
        managers = self.managers
        if self._full_then_one_other:
            return self._find_full_then_other_hit(block_hashes, max_length)
        hit_blocks: list[list[KVCacheBlock] | None] = [None] * len(managers)
        hit_lengths = [0] * len(managers)
        hit_length, longest = max_length, 0
        while True:
            length = hit_length
            for group_ids in self.spec_groups:
                first = managers[group_ids[0]]
                if _is_full(first) and hit_blocks[group_ids[0]] is not None:
                    length = min(length, hit_lengths[group_ids[0]])
                    continue
                blocks, length = first.find_longest_cache_hit(block_hashes, length, group_ids)
                for group_id, group_blocks in zip(group_ids, blocks, strict=True):
                    hit_blocks[group_id], hit_lengths[group_id] = group_blocks, length
                longest = max(longest, length)
            if length >= hit_length:
                break
            hit_length = length
        for group_id, manager in enumerate(managers):
            full_blocks = hit_blocks[group_id]
            if _is_full(manager) and full_blocks is not None:
                del full_blocks[cdiv(hit_length, self.block_size) :]
        found = tuple(blocks if blocks is not None else [] for blocks in hit_blocks)
        return found, hit_length, longest - hit_length

    def _find_full_then_other_hit(
        self, block_hashes: Sequence[bytes], max_length: int
    ) -> tuple[GroupBlocks, int, int]:
        """The fixed point when full attention and one other spec are all there is: the other
        spec, looked up within the full-attention hit, has the last word."""
        (full_ids, other_ids), managers = self.spec_groups, self.managers
        full_hit, full_length = managers[full_ids[0]].find_longest_cache_hit(
            block_hashes, max_length, full_ids
        )
        other_hit, hit_length = managers[other_ids[0]].find_longest_cache_hit(
            block_hashes, full_length, other_ids
        )
        num_hit_blocks = cdiv(hit_length, self.block_size)
        hit_blocks: list[Sequence[KVCacheBlock]] = [()] * len(managers)
        for group_id, blocks in zip(full_ids, full_hit, strict=True):
            del blocks[num_hit_blocks:]
            hit_blocks[group_id] = blocks
        for group_id, blocks in zip(other_ids, other_hit, strict=True):
            hit_blocks[group_id] = blocks
        return tuple(hit_blocks), hit_length, full_length - hit_length

    # ----- allocation ------------------------------------------------------------------

    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: GroupBlocks | None = None,
        num_lookahead_tokens: int = 0,
        *,
        full_sequence_must_fit: bool = False,
        has_scheduled_reqs: bool = True,
    ) -> list[KVCacheBlock] | AllocationRefusal:
        """Reserve slots in every group; returns group 0's new blocks.

        Out-of-window blocks are freed first (also when the allocation then fails); the
        full-sequence check counts a windowed group at most its admission cap.
        """
        if num_new_tokens == 0 and num_new_computed_tokens == 0:
            raise ValueError("num_new_tokens must be greater than 0 when there are no hits")
        hits = new_computed_blocks if new_computed_blocks is not None else self.no_hits
        request_id = request.request_id
        num_local_computed_tokens = request.num_computed_tokens + num_new_computed_tokens
        total_computed_tokens = min(num_local_computed_tokens, self.max_model_len)
        watermark_blocks = self._watermark_blocks(request, has_scheduled_reqs=has_scheduled_reqs)
        if full_sequence_must_fit:
            refusal = self._check_full_sequence(
                request, hits, total_computed_tokens, watermark_blocks
            )
            if refusal is not None:
                return refusal
        num_tokens_need_slot = min(
            total_computed_tokens + num_new_tokens + num_lookahead_tokens, self.max_model_len
        )
        num_processed_tokens = max(0, total_computed_tokens - request.num_in_flight_tokens)
        for manager in self.managers:
            manager.remove_skipped_blocks(request_id, num_processed_tokens)
        needed = self._get_num_blocks_to_allocate(
            request_id, num_tokens_need_slot, hits, num_local_computed_tokens
        )
        num_free_blocks = self.block_pool.get_num_free_blocks()
        if needed + watermark_blocks > num_free_blocks:
            return AllocationRefusal(RefusalCheck.SLOTS, needed, watermark_blocks, num_free_blocks)
        new_blocks = self._take_blocks(
            request_id, hits, num_local_computed_tokens, num_tokens_need_slot
        )
        if self.enable_caching:
            self.cache_blocks(
                request, min(total_computed_tokens + num_new_tokens, request.num_tokens)
            )
        return new_blocks[0]

    def _take_blocks(
        self, request_id: str, hits: GroupBlocks, num_hit_tokens: int, num_tokens: int
    ) -> tuple[list[KVCacheBlock], ...]:
        """Adopt the prefix hit in every group, then give each group `num_tokens` slots."""
        if any(hits):
            for manager, blocks in zip(self.managers, hits, strict=True):
                manager.add_local_computed_blocks(request_id, blocks, num_hit_tokens)
        new_blocks = tuple(
            manager.allocate_new_blocks(request_id, num_tokens) for manager in self.managers
        )
        self._step_new_blocks[request_id] = new_blocks
        return new_blocks

    def allocate_running_slots(
        self, request: Request, num_new_tokens: int, num_lookahead_tokens: int = 0
    ) -> Sequence[KVCacheBlock] | AllocationRefusal:
        """`allocate_slots` for a running request: no hits, no watermark, no full check.

        The running pass's call, made for every request every step, so it skips the work
        that would change nothing: no window call before a block can leave the window, no
        count when every table already has the slots, no caching call when no group has a
        newly full block.
        """
        request_id = request.request_id
        max_model_len = self.max_model_len
        block_size = self.block_size
        # Conditional expressions, not min()/max(): this runs for every request every step.
        num_computed_tokens = request.num_computed_tokens
        total_computed_tokens = (
            num_computed_tokens if num_computed_tokens < max_model_len else max_model_len
        )
        num_tokens_need_slot = total_computed_tokens + num_new_tokens + num_lookahead_tokens
        if num_tokens_need_slot > max_model_len:
            num_tokens_need_slot = max_model_len
        num_processed_tokens = total_computed_tokens - request.num_in_flight_tokens
        for num_tokens_next_skip, remove_skipped_blocks in self._window_skips:
            if num_processed_tokens >= num_tokens_next_skip.get(request_id, 0):
                remove_skipped_blocks(request_id, num_processed_tokens)
        num_required_blocks = -(-num_tokens_need_slot // block_size)
        new_blocks = self.no_hits
        for req_to_blocks in self._tables:
            if len(req_to_blocks.get(request_id, ())) < num_required_blocks:
                granted = self._allocate_running_blocks(
                    request_id, num_tokens_need_slot, num_computed_tokens
                )
                if isinstance(granted, AllocationRefusal):
                    return granted
                new_blocks = granted
                self._step_new_blocks[request_id] = new_blocks
                break
        if self.enable_caching:
            num_tokens = total_computed_tokens + num_new_tokens
            if num_tokens > request.num_tokens:
                num_tokens = request.num_tokens
            num_full_blocks = (num_tokens - self.num_reprefillable_tokens) // block_size
            num_hashed_blocks = len(request.block_hashes)
            if num_full_blocks > num_hashed_blocks:
                num_full_blocks = num_hashed_blocks
            for num_cached_block in self._num_cached_blocks:  # only if a group has a new one
                if num_cached_block.get(request_id, 0) < num_full_blocks:
                    self.cache_blocks(request, num_tokens)
                    break
        return new_blocks[0]

    def _allocate_running_blocks(
        self, request_id: str, num_tokens: int, num_computed_tokens: int
    ) -> GroupBlocks | AllocationRefusal:
        """Give every group `num_tokens` slots, or refuse if the pool lacks the blocks."""
        needed = self._get_num_blocks_to_allocate(
            request_id, num_tokens, self.no_hits, num_computed_tokens
        )
        num_free_blocks = self.block_pool.get_num_free_blocks()
        if needed > num_free_blocks:
            return AllocationRefusal(RefusalCheck.SLOTS, needed, 0, num_free_blocks)
        return tuple(
            manager.allocate_new_blocks(request_id, num_tokens) for manager in self.managers
        )

    def _watermark_blocks(self, request: Request, *, has_scheduled_reqs: bool) -> int:
        waiting = request.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)
        return self.watermark_blocks if has_scheduled_reqs and waiting else 0

    def _check_full_sequence(
        self,
        request: Request,
        hits: GroupBlocks,
        total_computed_tokens: int,
        watermark_blocks: int,
    ) -> AllocationRefusal | None:
        """Refuse unless the whole known sequence fits (windowed groups: their cap)."""
        full_num_tokens = min(request.num_tokens, self.max_model_len)
        needed = self._get_num_blocks_to_allocate(
            request.request_id, full_num_tokens, hits, total_computed_tokens, capped=True
        )
        num_free_blocks = self.block_pool.get_num_free_blocks()
        if needed + watermark_blocks > num_free_blocks:
            return AllocationRefusal(
                RefusalCheck.FULL_SEQUENCE, needed, watermark_blocks, num_free_blocks
            )
        return None

    def _get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        hits: GroupBlocks,
        total_computed_tokens: int,
        *,
        capped: bool = False,
    ) -> int:
        return sum(
            manager.get_num_blocks_to_allocate(
                request_id, num_tokens, blocks, total_computed_tokens, apply_admission_cap=capped
            )
            for manager, blocks in zip(self.managers, hits, strict=True)
        )

    # ----- caching and freeing ---------------------------------------------------------

    def cache_blocks(self, request: Request, num_tokens: int) -> None:
        """Register full blocks in every group; a sliding window only where a hit can end."""
        if not self.enable_caching:
            return
        num_tokens = max(0, num_tokens - self.num_reprefillable_tokens)
        boundaries = [request.num_prompt_tokens - 1]
        if request.shared_prefix_boundary:
            boundaries.append(request.shared_prefix_boundary)
        for manager in self.managers:
            manager.cache_blocks(request, num_tokens, self.retention_interval, boundaries)

    def free(self, request: Request) -> None:
        """Return every group's blocks, group by group, each last block first."""
        for manager in self.managers:
            manager.free(request.request_id)
        self._step_new_blocks.pop(request.request_id, None)

    # ----- reading the tables ----------------------------------------------------------

    def get_blocks(self, request_id: str) -> list[KVCacheBlock]:
        """Group 0's whole table (null entries included)."""
        return self.managers[0].req_to_blocks.get(request_id, [])

    def get_block_ids(self, request_id: str) -> list[int]:
        return [block.block_id for block in self.get_blocks(request_id)]

    def block_ids_by_group(self, request_id: str) -> tuple[tuple[int, ...], ...]:
        """Every group's whole table, 0 for a null entry."""
        return tuple(
            tuple(block.block_id for block in manager.req_to_blocks.get(request_id, ()))
            for manager in self.managers
        )

    def get_num_held_blocks_by_group(self) -> tuple[int, ...]:
        """The blocks each group's requests hold, null entries left out; a block several
        requests share through the prefix cache counts once (it is one block of the pool)."""
        return tuple(manager.num_held_blocks for manager in self.managers)

    def step_block_ids_by_group(
        self, req_ids: Iterable[str], admitted: Container[str]
    ) -> dict[str, tuple[tuple[int, ...], ...]]:
        """Each scheduled request's new blocks in every group at its last allocation; an
        admitted one's whole tables (0 for a null entry). Called once a step, at its end:
        it forgets the step's allocations."""
        step_new_blocks = self._step_new_blocks
        no_block_ids = self.no_block_ids
        by_request = {}
        for req_id in req_ids:
            if req_id in admitted:
                by_request[req_id] = self.block_ids_by_group(req_id)
                continue
            new_blocks = step_new_blocks.get(req_id)
            by_request[req_id] = (
                no_block_ids  # no group gave any (most decode steps)
                if new_blocks is None
                else tuple(tuple(block.block_id for block in blocks) for blocks in new_blocks)
            )
        step_new_blocks.clear()
        return by_request


def _is_full(manager: SingleTypeKVCacheManager) -> bool:
    return manager.spec.type is AttentionType.FULL


def _spec_groups(groups: Sequence[KVCacheGroupSpec]) -> list[list[int]]:
    """Group ids of equal specs, looked up together; full attention first."""
    by_spec: dict[KVCacheGroupSpec, list[int]] = {}
    for group_id, spec in enumerate(groups):
        by_spec.setdefault(spec, []).append(group_id)
    return sorted(by_spec.values(), key=lambda ids: groups[ids[0]].type is not AttentionType.FULL)
