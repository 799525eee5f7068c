"""A checkpoint: the scheduler's whole state at the start of a step, before its arrivals.

What a later decision reads, and nothing else: every unfinished request's counters,
tokens, drafts and block table, the waiting and running queues in order, the ids the
next `SchedulerOutput` ships (finished, preempted), the block pool (each block's
reference count and hash, the free queue's order, the prefix-cache index's order), and
under async scheduling the batch in the queue whose output is still to be processed, and
with `prefill_schedule_interval` the prefill cadence's counters.
A request's spec (prompt, sampling params, priority, LoRA, arrival) is not here: the
trace's `_requests` holds it. Every field is a snapshot; nothing aliases live state.

`take_checkpoint` reads one from an engine core; `engine/restore.py` puts one back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from .block_hash import BlockHash
from .core import EngineCore, EngineStep
from .kv_cache_block import KVCacheBlock
from .kv_cache_coordinator import KVCacheCoordinator
from .kv_cache_manager import KVCacheManager
from .request import Request, RequestStatus
from .scheduler_state import SchedulerState

WAITING = "waiting"
RUNNING = "running"
"""The queue a request is in (`RequestCheckpoint.queue`)."""

_block_id = attrgetter("block_id")
_ref_cnt = attrgetter("ref_cnt")
_block_hash = attrgetter("block_hash")


@dataclass(frozen=True, slots=True)
class RequestCheckpoint:
    """One unfinished request as the scheduler holds it."""

    request_id: str
    queue: str
    """`waiting` or `running`."""
    queue_position: int
    """Its place in that queue: the running list's order, the waiting queue's pop order."""
    status: RequestStatus
    num_computed_tokens: int
    output_token_ids: tuple[int, ...]
    num_output_placeholders: int
    num_in_flight_tokens: int
    num_stale_output_tokens: int
    num_preemptions: int
    is_prefill_chunk: bool
    spec_token_ids: tuple[int, ...]
    is_grammar_ready: bool | None
    """None: the request has no structured output."""
    block_ids: tuple[int, ...]
    """Its block table, prefix hits first."""
    num_cached_blocks: int
    """Leading blocks of its table registered in the prefix cache."""
    group_block_ids: tuple[tuple[int, ...], ...] = ()
    """The block tables of the KV cache groups after the first, in group order (0: a null
    entry, one a window left behind); () with one group. `block_ids` is group 0's."""
    group_num_cached_blocks: tuple[int, ...] = ()
    """`num_cached_blocks` of the KV cache groups after the first, in group order."""
    shared_prefix_boundary: int = 0
    """Hybrid groups: the full-attention hit its last prefix-cache lookup found beyond the
    one every group could serve; its later caching registers a window's blocks there too."""


@dataclass(frozen=True, slots=True)
class BlockPoolCheckpoint:
    """The block pool: every block's reference count and hash, and the orders that matter."""

    ref_cnts: tuple[int, ...]
    """By block id (the null block, 0, included)."""
    block_hashes: tuple[BlockHash | None, ...]
    """By block id; None: not cached."""
    free_block_ids: tuple[int, ...]
    """The free queue, front (next to be allocated) first."""
    cached_block_ids: tuple[int, ...]
    """The prefix-cache index in insertion order: of blocks sharing a hash, a lookup
    returns the earliest inserted."""


@dataclass(frozen=True, slots=True)
class PendingBatch:
    """Async scheduling: the batch in the queue, scheduled and run, its output not processed."""

    step: int
    """The step that scheduled it."""
    num_scheduled_tokens: tuple[tuple[str, int], ...]
    """In the output's order."""
    scheduled_spec_decode_tokens: tuple[tuple[str, tuple[int, ...]], ...]
    sampled_token_ids: tuple[tuple[str, tuple[int, ...]], ...]
    """What the model runner returned, in its order."""


@dataclass(frozen=True, slots=True)
class CadenceCheckpoint:
    """vLLM 0.33's prefill cadence (`prefill_schedule_interval`), named as vLLM's counters."""

    num_executed_steps: int
    last_prefill_step: int
    prefill_capacity_bound: bool
    deferred_req_ids: tuple[str, ...]
    """The waiting requests passed over (or waiting for a grammar): the capacity escape
    counts the waiting queue beyond them. Sorted."""


@dataclass(frozen=True, slots=True)
class SchedulerCheckpoint:
    step: int
    requests: tuple[RequestCheckpoint, ...]
    """In the scheduler's request order (arrival)."""
    finished_req_ids: tuple[str, ...]
    """Finished since the last `schedule()`: the next output ships them. Sorted."""
    preempted_req_ids: tuple[str, ...]
    """Preempted since the last `schedule()`. Sorted."""
    prev_step_scheduled_req_ids: tuple[str, ...]
    """Scheduled by the last `schedule()` (their tokens are not shipped again). Sorted."""
    block_pool: BlockPoolCheckpoint
    pending_batch: PendingBatch | None = None
    prefill_cadence: CadenceCheckpoint | None = None
    """None: the scheduler keeps no cadence (or the recorder that took it did not read it)."""

    @property
    def waiting(self) -> tuple[str, ...]:
        return _in_queue(self.requests, WAITING)

    @property
    def running(self) -> tuple[str, ...]:
        return _in_queue(self.requests, RUNNING)


def _in_queue(requests: tuple[RequestCheckpoint, ...], queue: str) -> tuple[str, ...]:
    members = sorted((r.queue_position, r.request_id) for r in requests if r.queue == queue)
    return tuple(request_id for _, request_id in members)


def take_checkpoint(
    core: EngineCore[Any], step: int, pending_step: int | None
) -> SchedulerCheckpoint:
    """The state of `core` now, at the start of `step` (`pending_step`: the step of the
    batch in its queue, if any)."""
    scheduler = core.scheduler
    assert isinstance(scheduler, SchedulerState), "only the engine's own scheduler"
    positions = {request.request_id: i for i, request in enumerate(scheduler.running)}
    waiting = {request.request_id: i for i, request in enumerate(scheduler.waiting)}
    tables = _group_tables(scheduler.kv_cache_manager)
    requests = tuple(
        _request_checkpoint(request, positions, waiting, tables)
        for request in scheduler.requests.values()
    )
    pending = None
    if core.batch_queue:
        assert len(core.batch_queue) == 1 and pending_step is not None
        pending = _pending_batch(core.batch_queue[0], pending_step)
    return SchedulerCheckpoint(
        step=step,
        requests=requests,
        finished_req_ids=tuple(sorted(scheduler.finished_req_ids)),
        preempted_req_ids=tuple(sorted(scheduler.preempted_req_ids)),
        prev_step_scheduled_req_ids=tuple(sorted(scheduler.prev_step_scheduled_req_ids)),
        block_pool=_block_pool_checkpoint(scheduler),
        pending_batch=pending,
        prefill_cadence=_cadence_checkpoint(scheduler),
    )


def _cadence_checkpoint(scheduler: SchedulerState) -> CadenceCheckpoint | None:
    cadence = scheduler.prefill_cadence
    if cadence is None:
        return None
    return CadenceCheckpoint(
        num_executed_steps=cadence.num_executed_steps,
        last_prefill_step=cadence.last_prefill_step,
        prefill_capacity_bound=cadence.prefill_capacity_bound,
        deferred_req_ids=tuple(sorted(scheduler.deferred_waiting)),
    )


_GroupTable = tuple[dict[str, list[KVCacheBlock]], dict[str, int]]
"""One KV cache group's `req_to_blocks` and `num_cached_block`."""


def _group_tables(manager: KVCacheManager | KVCacheCoordinator) -> tuple[_GroupTable, ...]:
    """Every KV cache group's tables, in group order."""
    if isinstance(manager, KVCacheCoordinator):
        return tuple((m.req_to_blocks, m.num_cached_block) for m in manager.managers)
    assert isinstance(manager, KVCacheManager)
    return ((manager.req_to_blocks, manager.num_cached_block),)


def _request_checkpoint(
    request: Request,
    running: dict[str, int],
    waiting: dict[str, int],
    tables: tuple[_GroupTable, ...],
) -> RequestCheckpoint:
    request_id = request.request_id
    (req_to_blocks, num_cached_block), *other_groups = tables
    in_running = request_id in running
    structured = request.structured_output_request
    return RequestCheckpoint(
        request_id=request_id,
        queue=RUNNING if in_running else WAITING,
        queue_position=running[request_id] if in_running else waiting[request_id],
        status=request.status,
        num_computed_tokens=request.num_computed_tokens,
        output_token_ids=tuple(request.output_token_ids),
        num_output_placeholders=request.num_output_placeholders,
        num_in_flight_tokens=request.num_in_flight_tokens,
        num_stale_output_tokens=request.num_stale_output_tokens,
        num_preemptions=request.num_preemptions,
        is_prefill_chunk=request.is_prefill_chunk,
        spec_token_ids=tuple(request.spec_token_ids),
        is_grammar_ready=None if structured is None else structured.is_grammar_ready,
        block_ids=tuple(map(_block_id, req_to_blocks.get(request_id, ()))),
        num_cached_blocks=num_cached_block.get(request_id, 0),
        group_block_ids=tuple(
            tuple(map(_block_id, blocks.get(request_id, ()))) for blocks, _ in other_groups
        ),
        group_num_cached_blocks=tuple(cached.get(request_id, 0) for _, cached in other_groups),
        shared_prefix_boundary=request.shared_prefix_boundary,
    )


def _block_pool_checkpoint(scheduler: SchedulerState) -> BlockPoolCheckpoint:
    """The pool's columns, each read in one pass at C speed (`map`): at 100,000 blocks this
    is most of a checkpoint's time on the engine thread."""
    pool = scheduler.kv_cache_manager.block_pool
    return BlockPoolCheckpoint(
        ref_cnts=tuple(map(_ref_cnt, pool.blocks)),
        block_hashes=tuple(map(_block_hash, pool.blocks)),
        free_block_ids=tuple(pool.free_block_queue.block_ids()),
        cached_block_ids=pool.cached_block_hash_to_block.block_ids(),
    )


def _pending_batch(batch: EngineStep, step: int) -> PendingBatch:
    output = batch.scheduler_output
    runner_output = batch.model_runner_output
    return PendingBatch(
        step=step,
        num_scheduled_tokens=tuple(output.num_scheduled_tokens.items()),
        scheduled_spec_decode_tokens=tuple(
            (req_id, tuple(tokens))
            for req_id, tokens in output.scheduled_spec_decode_tokens.items()
        ),
        sampled_token_ids=tuple(
            (req_id, tuple(tokens))
            for req_id, tokens in zip(
                runner_output.req_ids, runner_output.sampled_token_ids, strict=True
            )
        ),
    )


def checkpoint_differences(
    expected: SchedulerCheckpoint, actual: SchedulerCheckpoint, limit: int = 5
) -> list[str]:
    """Where two states differ, field by field, naming the request or block (at most
    `limit`): '' when they are equal. `expected` is the one held (a trace's), `actual` the
    one reached (a replay's)."""
    found: list[str] = []
    at = f"step {expected.step}"
    expected_requests = {r.request_id: r for r in expected.requests}
    actual_requests = {r.request_id: r for r in actual.requests}
    for request_id in sorted(expected_requests.keys() ^ actual_requests.keys()):
        held = "holds" if request_id in expected_requests else "lacks"
        found.append(
            f"{at}: the checkpoint {held} unfinished request {request_id!r}, the replay not"
        )
    for request_id in sorted(expected_requests.keys() & actual_requests.keys()):
        found += _request_differences(
            expected_requests[request_id], actual_requests[request_id], at
        )
    for name in ("finished_req_ids", "preempted_req_ids", "prev_step_scheduled_req_ids"):
        mine, theirs = getattr(expected, name), getattr(actual, name)
        if mine != theirs:
            found.append(f"{at}: {name}: checkpoint {list(mine)}, replay {list(theirs)}")
    found += _block_pool_differences(expected.block_pool, actual.block_pool, at)
    if expected.pending_batch != actual.pending_batch:
        found.append(
            f"{at}: the queued batch: checkpoint {expected.pending_batch}, "
            f"replay {actual.pending_batch}"
        )
    if expected.prefill_cadence != actual.prefill_cadence:
        found.append(
            f"{at}: the prefill cadence: checkpoint {expected.prefill_cadence}, "
            f"replay {actual.prefill_cadence}"
        )
    return found[:limit]


_REQUEST_FIELDS = tuple(
    field.name for field in dataclasses.fields(RequestCheckpoint) if field.name != "request_id"
)


def _request_differences(
    expected: RequestCheckpoint, actual: RequestCheckpoint, at: str
) -> list[str]:
    return [
        f"{at}: request {expected.request_id!r}: {name}: checkpoint "
        f"{_shown(getattr(expected, name))}, replay {_shown(getattr(actual, name))}"
        for name in _REQUEST_FIELDS
        if getattr(expected, name) != getattr(actual, name)
    ]


def _block_pool_differences(
    expected: BlockPoolCheckpoint, actual: BlockPoolCheckpoint, at: str
) -> list[str]:
    found = []
    if len(expected.ref_cnts) != len(actual.ref_cnts):
        return [
            f"{at}: num_blocks: checkpoint {len(expected.ref_cnts)}, replay {len(actual.ref_cnts)}"
        ]
    for block_id, (mine, theirs) in enumerate(zip(expected.ref_cnts, actual.ref_cnts, strict=True)):
        if mine != theirs:
            found.append(f"{at}: block {block_id}: ref_cnt: checkpoint {mine}, replay {theirs}")
    for block_id, (held, reached) in enumerate(
        zip(expected.block_hashes, actual.block_hashes, strict=True)
    ):
        if held != reached:
            found.append(
                f"{at}: block {block_id}: block_hash: checkpoint {_hash(held)}, "
                f"replay {_hash(reached)}"
            )
    for name in ("free_block_ids", "cached_block_ids"):
        ids: tuple[int, ...] = getattr(expected, name)
        other: tuple[int, ...] = getattr(actual, name)
        if ids != other:
            index = next(
                (i for i, (a, b) in enumerate(zip(ids, other, strict=False)) if a != b),
                min(len(ids), len(other)),
            )
            found.append(
                f"{at}: {name} differ from position {index}: checkpoint "
                f"{_shown(ids[index : index + 4])}, replay {_shown(other[index : index + 4])}"
            )
    return found


def _hash(block_hash: BlockHash | None) -> str:
    return "none" if block_hash is None else block_hash[:6].hex()


def _shown(value: object) -> str:
    """A value in one short line (a long token list cut)."""
    if isinstance(value, tuple) and len(value) > 8:
        return f"({', '.join(map(str, value[:8]))}, … {len(value)} in all)"
    return str(value)
