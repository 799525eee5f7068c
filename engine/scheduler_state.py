"""What the scheduler holds between steps (requests, queues, KV cache), and requests in and out.

The scheduler's passes are mixins over this state (`running_pass.py`,
`waiting_pass.py`, `output_update.py`); `Scheduler` puts them together, so a
what-if scheduler overrides any phase of any pass on one class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .block_hash import make_block_hasher
from .config import EngineConfig
from .kv_cache_coordinator import KVCacheCoordinator
from .kv_cache_manager import KVCacheManager
from .prefill_cadence import PrefillCadence
from .request import BlockHasher, Request, RequestStatus
from .request_queue import create_request_queue

if TYPE_CHECKING:
    from .probe import Probe


class SchedulerState:
    """The requests, the waiting queue, the running list and the KV cache of one scheduler."""

    def __init__(self, config: EngineConfig, probe: Probe | None = None) -> None:
        self.config = config
        self.probe = probe
        self.policy = config.policy
        self.rules = config.vllm_rules
        self.max_model_len = config.max_model_len
        self.block_size = config.block_size
        self.kv_cache_manager = _make_kv_cache_manager(config)
        self.get_num_held_blocks_by_group = _held_blocks_counter(self.kv_cache_manager)
        """Each KV cache group's held blocks; None without `kv_cache_groups` (nothing counted)."""
        self.block_hasher: BlockHasher | None = (
            make_block_hasher(
                config.block_size,
                config.block_hasher,
                config.none_hash_bytes,
                config.num_hash_lookahead_tokens,
            )
            if config.enable_prefix_caching
            else None
        )
        self.requests: dict[str, Request] = {}
        self.waiting = create_request_queue(config.policy)
        self.running: list[Request] = []
        self.finished_req_ids: set[str] = set()
        self.preempted_req_ids: set[str] = set()
        self.prev_step_scheduled_req_ids: set[str] = set()
        self.num_spec_tokens = config.num_speculative_tokens
        self.num_lookahead_tokens = config.num_lookahead_tokens
        self.draft_slots = config.max_num_new_slots_for_drafting
        """Input slots each scheduled request takes for drafting (vLLM's `draft_slots`)."""
        self.num_prefill_lookahead = config.num_prefill_lookahead_tokens
        self.prefill_cadence = (
            PrefillCadence(config.local_prefill_interval) if config.keeps_prefill_cadence else None
        )
        """vLLM 0.33's prefill cadence counters, kept when `prefill_schedule_interval` is set."""
        self.deferred_waiting: set[str] = set()
        """Waiting requests that were passed over (or wait for a grammar), until admitted."""

    def add_request(self, request: Request) -> None:
        if request.request_id in self.requests:
            raise ValueError(f"duplicate request id {request.request_id!r}")
        self.waiting.add_request(request)
        self.requests[request.request_id] = request
        if request.status == RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR:
            self.deferred_waiting.add(request.request_id)

    def finish_requests(
        self, request_ids: str | Iterable[str], finished_status: RequestStatus
    ) -> list[Request]:
        """Finish requests from outside (aborts); unknown or finished ids are ignored.

        Requests are freed in the order given. vLLM turns a list of ids into a set,
        so its order (and the free order of blocks) depends on the hash seed; one
        id per call, as vLLM's engine does for aborts, matches it exactly.
        """
        assert RequestStatus.is_finished(finished_status)
        ids = (request_ids,) if isinstance(request_ids, str) else dict.fromkeys(request_ids)
        finished = [
            request
            for request in map(self.requests.get, ids)
            if request is not None and not request.is_finished()
        ]
        running = {r for r in finished if r.status == RequestStatus.RUNNING}
        if running:
            self.running = [r for r in self.running if r not in running]
        waiting = [r for r in finished if r.status != RequestStatus.RUNNING]
        if waiting:
            self.waiting.remove_requests(waiting)
            self.deferred_waiting.difference_update(r.request_id for r in waiting)
        for request in finished:
            request.status = finished_status
            self._free_request(request)
        return finished

    def _free_request(self, request: Request) -> None:
        self.finished_req_ids.add(request.request_id)
        self.kv_cache_manager.free(request)
        del self.requests[request.request_id]

    def _reserve_prefill_lookahead(
        self, request: Request, num_computed_tokens: int, num_new_tokens: int
    ) -> int:
        """Never end a prefill chunk within `num_prefill_lookahead` tokens of the prompt end.

        A multi-module MTP drafter reads that many known tokens past a chunk, so a chunk
        either finishes the prompt or leaves at least that many for the next one.
        """
        remaining = request.num_tokens - num_computed_tokens - num_new_tokens
        if 0 < remaining < self.num_prefill_lookahead:
            num_new_tokens -= self.num_prefill_lookahead - remaining
        return max(num_new_tokens, 0)

    def get_request_counts(self) -> tuple[int, int]:
        """(running, waiting)."""
        return len(self.running), len(self.waiting)

    def get_num_free_blocks(self) -> int:
        return self.kv_cache_manager.get_num_free_blocks()

    def has_unfinished_requests(self) -> bool:
        return bool(self.running) or bool(self.waiting)

    def has_finished_requests(self) -> bool:
        return bool(self.finished_req_ids)

    def has_requests(self) -> bool:
        """Anything to schedule, or finished ids still to ship."""
        return self.has_unfinished_requests() or self.has_finished_requests()


def _held_blocks_counter(
    manager: KVCacheManager | KVCacheCoordinator,
) -> Callable[[], tuple[int, ...]] | None:
    if isinstance(manager, KVCacheCoordinator):
        return manager.get_num_held_blocks_by_group
    return None


def _make_kv_cache_manager(config: EngineConfig) -> KVCacheManager | KVCacheCoordinator:
    """One full-attention group (the default), or a coordinator over `kv_cache_groups`."""
    num_reprefillable_tokens = max(0, config.num_prefill_lookahead_tokens - 1)
    if config.kv_cache_groups is None:
        return KVCacheManager(
            num_blocks=config.num_blocks,
            block_size=config.block_size,
            max_model_len=config.max_model_len,
            enable_caching=config.enable_prefix_caching,
            watermark_blocks=config.watermark_blocks,
            use_eagle=config.use_eagle_block_drop,
            num_reprefillable_tokens=num_reprefillable_tokens,
        )
    return KVCacheCoordinator(
        config.kv_cache_groups,
        config.num_blocks,
        config.block_size,
        config.max_model_len,
        enable_caching=config.enable_prefix_caching,
        max_in_flight_tokens=config.max_in_flight_tokens,
        watermark_blocks=config.watermark_blocks,
        retention_interval=config.prefix_cache_retention_interval,
        extra_retained_tokens=config.sliding_window_extra_tokens,
        num_reprefillable_tokens=num_reprefillable_tokens,
    )
