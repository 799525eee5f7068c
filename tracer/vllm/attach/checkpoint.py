"""A checkpoint of a live vLLM scheduler: its state at the start of an iteration, as the
`SchedulerCheckpoint` stepscope's engine takes.

`take_snapshot` runs on vLLM's engine thread and only copies, each column in one pass
at C speed (`map` over `attrgetter`); `VllmSnapshot.checkpoint` turns the copies into
the checkpoint on the recorder's builder thread. The mapping, field by field:

* a request's status, `num_computed_tokens`, `num_output_placeholders`,
  `num_in_flight_tokens`, `num_stale_output_tokens`, `num_preemptions`,
  `is_prefill_chunk` and `spec_token_ids` are vLLM's `Request` attributes of those
  names; its output tokens are `_output_token_ids` (the list `output_token_ids` wraps);
  `is_grammar_ready` is whether its structured-output grammar has compiled (what the
  waiting pass reads as `grammar is not None`), read without resolving the future (a
  server compiles grammars in the background: this is how far they are when the
  checkpoint is taken);
* the running list in order; the waiting queue in pop order, vLLM's
  `kv_holding_waiting` (drained first) before `waiting`; a priority heap's pop order
  is its entries sorted by `Request.__lt__`'s key;
* `finished_req_ids` and `prev_step_scheduled_req_ids` are vLLM's sets of those
  names, `preempted_req_ids` is `reset_preempted_req_ids`;
* the block pool: each block's `ref_cnt` (the null block's taken as 0), and its hash,
  vLLM's `BlockHashWithGroupId` (with one full-attention group the 4-byte group id cut
  off: stepscope's engine keys a lone group's blocks by the hash alone; with hybrid
  groups, whole, as the engine keys them); the free queue walked along
  `next_free_block` from its fake head; the prefix-cache index
  (`cached_block_hash_to_block`) in its dict's order;
* each request's block table and `num_cached_block` in every KV cache group (the
  coordinator's `single_type_managers`, a window's null entries as block 0), and
  `shared_prefix_boundary`, the junction a hybrid admission pinned;
* under async scheduling, the batch in `EngineCore`'s batch queue as the recording
  knows it: its `SchedulerOutput` at snapshot time, its sampled tokens once its
  output is processed (`PendingSnapshot`);
* under 0.33 with `prefill_schedule_interval` > 1, the prefill cadence's counters
  (`num_executed_steps`, `last_prefill_step`, `prefill_capacity_bound`) and the ids in
  `deferred_waiting`.

vLLM state the engine does not model is not here: `drop_stale_output`, and what else
only a KV connector or `reset_prefix_cache` sets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from typing import Any

from stepscope.engine import RequestStatus
from stepscope.engine.checkpoint import (
    RUNNING,
    WAITING,
    BlockPoolCheckpoint,
    CadenceCheckpoint,
    PendingBatch,
    RequestCheckpoint,
    SchedulerCheckpoint,
)

from .grammar_readiness import is_grammar_compiled
from .schedule_facts import applies_prefill_cadence

GROUP_ID_BYTES = 4
"""`make_block_hash_with_group_id` appends the group id as 4 big-endian bytes."""

_request_id = attrgetter("request_id")
_status = attrgetter("status")
_num_computed_tokens = attrgetter("num_computed_tokens")
_output_token_ids = attrgetter("_output_token_ids")
_num_output_placeholders = attrgetter("num_output_placeholders")
_num_in_flight_tokens = attrgetter("num_in_flight_tokens")
_num_stale_output_tokens = attrgetter("num_stale_output_tokens")
_num_preemptions = attrgetter("num_preemptions")
_is_prefill_chunk = attrgetter("is_prefill_chunk")
_spec_token_ids = attrgetter("spec_token_ids")
_structured_output_request = attrgetter("structured_output_request")
_shared_prefix_boundary = attrgetter("shared_prefix_boundary")
_heap_key = attrgetter("priority", "arrival_time", "request_id")
_block_id = attrgetter("block_id")
_ref_cnt = attrgetter("ref_cnt")
_raw_block_hash = attrgetter("_block_hash")
_next_free_block = attrgetter("next_free_block")


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """A waiting queue: request ids in order (FCFS), or a heap's entries' sort keys."""

    entries: tuple[Any, ...]
    is_heap: bool

    def pop_order(self) -> list[str]:
        if not self.is_heap:
            return list(self.entries)
        return [request_id for _, _, request_id in sorted(self.entries)]


@dataclass(frozen=True, slots=True)
class RequestColumns:
    """Every request the scheduler holds, one tuple per attribute, in `requests` order."""

    request_ids: tuple[str, ...]
    statuses: tuple[Any, ...]
    num_computed_tokens: tuple[int, ...]
    output_token_ids: tuple[tuple[int, ...], ...]
    num_output_placeholders: tuple[int, ...]
    num_in_flight_tokens: tuple[int, ...]
    num_stale_output_tokens: tuple[int, ...]
    num_preemptions: tuple[int, ...]
    is_prefill_chunk: tuple[bool, ...]
    spec_token_ids: tuple[tuple[int, ...], ...]
    is_grammar_ready: tuple[bool | None, ...]
    blocks: tuple[tuple[tuple[Any, ...], ...], ...]
    """By KV cache group, each request's block table: vLLM's block objects, whose
    `block_id` never changes."""
    num_cached_blocks: tuple[tuple[int, ...], ...]
    """By KV cache group, each request's `num_cached_block`."""
    shared_prefix_boundaries: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PoolColumns:
    """The block pool, one tuple per attribute, by block id."""

    ref_cnts: tuple[int, ...]
    block_hashes: tuple[bytes | None, ...]
    """vLLM's keys: the hash, then the group id."""
    next_free_blocks: tuple[Any, ...]
    first_free_block: Any
    num_free_blocks: int
    cached_block_ids: tuple[int, ...]
    keyed_by_group: bool
    """The checkpoint keeps vLLM's keys whole (the engine's coordinator keys them so)."""


@dataclass(frozen=True, slots=True)
class PendingSnapshot:
    """The batch in the queue, its sampled tokens still to come."""

    step: int
    num_scheduled_tokens: tuple[tuple[str, int], ...]
    scheduled_spec_decode_tokens: tuple[tuple[str, tuple[int, ...]], ...]

    @staticmethod
    def of(
        step: int,
        num_scheduled_tokens: Mapping[str, int],
        scheduled_spec_decode_tokens: Mapping[str, Sequence[int]],
    ) -> PendingSnapshot:
        """A copy of what the batch's `SchedulerOutput` scheduled, and the drafts it scheduled."""
        return PendingSnapshot(
            step,
            tuple(num_scheduled_tokens.items()),
            tuple(
                (req_id, tuple(tokens)) for req_id, tokens in scheduled_spec_decode_tokens.items()
            ),
        )

    def batch(self, sampled_token_ids: Sequence[tuple[str, tuple[int, ...]]]) -> PendingBatch:
        return PendingBatch(
            self.step,
            self.num_scheduled_tokens,
            self.scheduled_spec_decode_tokens,
            tuple(sampled_token_ids),
        )


@dataclass(frozen=True, slots=True)
class VllmSnapshot:
    """A vLLM scheduler's state copied at the start of `step`, not yet converted."""

    step: int
    requests: RequestColumns
    running: tuple[str, ...]
    waiting: tuple[QueueSnapshot, ...]
    """In the order the waiting pass drains them."""
    finished_req_ids: tuple[str, ...]
    preempted_req_ids: tuple[str, ...]
    prev_step_scheduled_req_ids: tuple[str, ...]
    pool: PoolColumns
    pending: PendingSnapshot | None
    cadence: CadenceCheckpoint | None

    def checkpoint(self, pending_batch: PendingBatch | None = None) -> SchedulerCheckpoint:
        """The `SchedulerCheckpoint` this snapshot holds (`pending_batch`: the queued batch
        completed with its sampled tokens)."""
        assert (pending_batch is None) == (self.pending is None)
        return SchedulerCheckpoint(
            step=self.step,
            requests=_request_checkpoints(self),
            finished_req_ids=tuple(sorted(self.finished_req_ids)),
            preempted_req_ids=tuple(sorted(self.preempted_req_ids)),
            prev_step_scheduled_req_ids=tuple(sorted(self.prev_step_scheduled_req_ids)),
            block_pool=_block_pool_checkpoint(self.pool),
            pending_batch=pending_batch,
            prefill_cadence=self.cadence,
        )


# ----- the engine thread: copies only ------------------------------------------


def take_snapshot(
    scheduler: Any, step: int, pending: PendingSnapshot | None, *, keyed_by_group: bool
) -> VllmSnapshot:
    """Copy what a checkpoint of `scheduler` at the start of `step` needs (`keyed_by_group`:
    the engine runs its KV cache groups through a coordinator, which keys cached blocks with
    their group id as vLLM does; else one full-attention group, keyed by the hash alone)."""
    managers = scheduler.kv_cache_manager.coordinator.single_type_managers
    return VllmSnapshot(
        step=step,
        requests=_request_columns(tuple(scheduler.requests.values()), managers),
        running=tuple(map(_request_id, scheduler.running)),
        waiting=(_queue_snapshot(scheduler.kv_holding_waiting), _queue_snapshot(scheduler.waiting)),
        finished_req_ids=tuple(scheduler.finished_req_ids),
        preempted_req_ids=tuple(scheduler.reset_preempted_req_ids),
        prev_step_scheduled_req_ids=tuple(scheduler.prev_step_scheduled_req_ids),
        pool=_pool_columns(scheduler.kv_cache_manager.block_pool, keyed_by_group=keyed_by_group),
        pending=pending,
        cadence=_cadence(scheduler),
    )


def _cadence(scheduler: Any) -> CadenceCheckpoint | None:
    """vLLM 0.33's prefill cadence counters, where the scheduler holds prefill itself (the
    engine keeps them then: an interval above 1)."""
    if not applies_prefill_cadence(scheduler):
        return None
    return CadenceCheckpoint(
        num_executed_steps=scheduler.num_executed_steps,
        last_prefill_step=scheduler.last_prefill_step,
        prefill_capacity_bound=bool(scheduler.prefill_capacity_bound),
        deferred_req_ids=tuple(sorted(map(_request_id, scheduler.deferred_waiting))),
    )


def _request_columns(requests: tuple[Any, ...], managers: Sequence[Any]) -> RequestColumns:
    request_ids = tuple(map(_request_id, requests))
    return RequestColumns(
        request_ids=request_ids,
        statuses=tuple(map(_status, requests)),
        num_computed_tokens=tuple(map(_num_computed_tokens, requests)),
        output_token_ids=tuple(map(tuple, map(_output_token_ids, requests))),
        num_output_placeholders=tuple(map(_num_output_placeholders, requests)),
        num_in_flight_tokens=tuple(map(_num_in_flight_tokens, requests)),
        num_stale_output_tokens=tuple(map(_num_stale_output_tokens, requests)),
        num_preemptions=tuple(map(_num_preemptions, requests)),
        is_prefill_chunk=tuple(map(_is_prefill_chunk, requests)),
        spec_token_ids=tuple(map(tuple, map(_spec_token_ids, requests))),
        is_grammar_ready=tuple(map(_grammar_ready, map(_structured_output_request, requests))),
        blocks=tuple(
            tuple(map(tuple, map(manager.req_to_blocks.get, request_ids, repeat(()))))
            for manager in managers
        ),
        num_cached_blocks=tuple(
            tuple(map(manager.num_cached_block.get, request_ids, repeat(0))) for manager in managers
        ),
        shared_prefix_boundaries=tuple(map(_shared_prefix_boundary, requests)),
    )


def _grammar_ready(structured_output_request: Any) -> bool | None:
    """Whether the grammar has compiled (None: no structured output), the future untouched."""
    if structured_output_request is None:
        return None
    return is_grammar_compiled(structured_output_request)


def _queue_snapshot(queue: Any) -> QueueSnapshot:
    heap = getattr(queue, "_heap", None)
    if heap is None:
        return QueueSnapshot(tuple(map(_request_id, queue)), is_heap=False)
    return QueueSnapshot(tuple(map(_heap_key, heap)), is_heap=True)


def _pool_columns(pool: Any, *, keyed_by_group: bool) -> PoolColumns:
    blocks = pool.blocks
    free_block_queue = pool.free_block_queue
    return PoolColumns(
        ref_cnts=tuple(map(_ref_cnt, blocks)),
        block_hashes=tuple(map(_raw_block_hash, blocks)),
        next_free_blocks=tuple(map(_next_free_block, blocks)),
        first_free_block=free_block_queue.fake_free_list_head.next_free_block,
        num_free_blocks=free_block_queue.num_free_blocks,
        cached_block_ids=_cached_block_ids(pool.cached_block_hash_to_block._cache),
        keyed_by_group=keyed_by_group,
    )


def _cached_block_ids(cache: Mapping[bytes, Any]) -> tuple[int, ...]:
    """Every cached block's id, hashes in the index's order and, of blocks sharing a hash,
    the one a lookup returns first."""
    try:  # most hashes have one block: one pass at C speed
        return tuple(map(_block_id, cache.values()))
    except AttributeError:  # a hash held by several blocks maps to a dict of them
        pass
    ids: list[int] = []
    for blocks in cache.values():
        if isinstance(blocks, dict):
            ids.extend(blocks)
        else:
            ids.append(blocks.block_id)
    return tuple(ids)


# ----- the builder thread: the conversion ----------------------------------------


def _request_checkpoints(snapshot: VllmSnapshot) -> tuple[RequestCheckpoint, ...]:
    columns = snapshot.requests
    running = {request_id: i for i, request_id in enumerate(snapshot.running)}
    waiting_order = [rid for queue in snapshot.waiting for rid in queue.pop_order()]
    waiting = {request_id: i for i, request_id in enumerate(waiting_order)}
    return tuple(
        RequestCheckpoint(
            request_id=request_id,
            queue=RUNNING if request_id in running else WAITING,
            queue_position=_queue_position(request_id, running, waiting),
            status=RequestStatus[columns.statuses[i].name],
            num_computed_tokens=columns.num_computed_tokens[i],
            output_token_ids=columns.output_token_ids[i],
            num_output_placeholders=columns.num_output_placeholders[i],
            num_in_flight_tokens=columns.num_in_flight_tokens[i],
            num_stale_output_tokens=columns.num_stale_output_tokens[i],
            num_preemptions=columns.num_preemptions[i],
            is_prefill_chunk=columns.is_prefill_chunk[i],
            spec_token_ids=columns.spec_token_ids[i],
            is_grammar_ready=columns.is_grammar_ready[i],
            block_ids=tuple(map(_block_id, columns.blocks[0][i])),
            num_cached_blocks=columns.num_cached_blocks[0][i],
            group_block_ids=tuple(tuple(map(_block_id, group[i])) for group in columns.blocks[1:]),
            group_num_cached_blocks=tuple(group[i] for group in columns.num_cached_blocks[1:]),
            shared_prefix_boundary=columns.shared_prefix_boundaries[i],
        )
        for i, request_id in enumerate(columns.request_ids)
    )


def _queue_position(request_id: str, running: dict[str, int], waiting: dict[str, int]) -> int:
    if request_id in running:
        return running[request_id]
    if request_id in waiting:
        return waiting[request_id]
    raise ValueError(f"request {request_id!r} is in neither vLLM's running list nor its queues")


def _block_pool_checkpoint(pool: PoolColumns) -> BlockPoolCheckpoint:
    block_hashes = pool.block_hashes
    if not pool.keyed_by_group:
        block_hashes = tuple(None if key is None else key[:-GROUP_ID_BYTES] for key in block_hashes)
    return BlockPoolCheckpoint(
        # The null block's count is 0: vLLM 0.32 takes a reference off it for every freed
        # window entry (0.33 does not), and no decision reads it.
        ref_cnts=(0, *pool.ref_cnts[1:]),
        block_hashes=block_hashes,
        free_block_ids=_free_block_ids(pool),
        cached_block_ids=pool.cached_block_ids,
    )


def _free_block_ids(pool: PoolColumns) -> tuple[int, ...]:
    """The free queue front first, walked along the copied `next_free_block` links (the
    fake tail's id is -1)."""
    next_ids = [None if block is None else block.block_id for block in pool.next_free_blocks]
    free: list[int] = []
    block_id = pool.first_free_block.block_id
    while block_id != -1:
        free.append(block_id)
        block_id = next_ids[block_id]
    if len(free) != pool.num_free_blocks:
        raise ValueError(
            f"vLLM's free queue links {len(free)} blocks, its count says {pool.num_free_blocks}"
        )
    return tuple(free)
