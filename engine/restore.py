"""A checkpoint put back into a fresh engine core, so a run goes on from its step.

The state is checked before anything is built from it: a checkpoint that could not be
a scheduler's (a block held by more requests than its reference count says, a free
block missing from the free queue, a request unknown to the workload) is a
`CheckpointError` naming the field, and so is a config the state cannot take (fewer
blocks than those in use, a `max_model_len` a request has already reached, a block size
or feature that shapes the state changed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from .block_pool import FreeKVCacheBlockQueue
from .checkpoint import CadenceCheckpoint, PendingBatch, RequestCheckpoint, SchedulerCheckpoint
from .config import HASHING_KNOBS, EngineConfig
from .core import EngineCore, EngineStep
from .errors import InputError
from .kv_cache_block import KVCacheBlock
from .kv_cache_coordinator import KVCacheCoordinator
from .kv_cache_manager import KVCacheManager
from .outputs import ModelRunnerOutput
from .request import Request, RequestStatus
from .scheduler_output import NO_SPEC_DECODE_TOKENS, CachedRequestData, SchedulerOutput
from .scheduler_state import SchedulerState
from .workload import RequestSpec

SHAPING_KNOBS = (
    "block_size",
    "enable_prefix_caching",
    "async_scheduling",
    "num_speculative_tokens",
    "speculative_method",
    "kv_cache_groups",
    *HASHING_KNOBS,
)
"""Knobs the state's shape depends on: block tables, hashes, the batch queue, drafts."""


class CheckpointError(InputError):
    """A checkpoint that cannot be restored (damaged, or at odds with the config)."""


def check_knobs(checkpoint_config: EngineConfig, config: EngineConfig) -> None:
    """A what-if's config against the config the checkpoint was taken under."""
    recorded, wanted = checkpoint_config.to_dict(), config.to_dict()
    for knob in SHAPING_KNOBS:
        if recorded.get(knob) != wanted.get(knob):
            raise CheckpointError(
                f"{knob}: {wanted.get(knob)} cannot start from a checkpoint taken with "
                f"{recorded.get(knob)} (the state's shape depends on it); replay from step 0"
            )


def check_hashes_computable(config: EngineConfig) -> None:
    """Whether the engine computes the block hashes a checkpoint taken under `config` holds."""
    if config.enable_prefix_caching and not config.block_hashes_reproducible:
        raise CheckpointError(
            f"block_hasher: {config.block_hasher} hashes need the xxhash package, which "
            "stepscope does not use, so this trace's checkpoints cannot be restored or "
            "checked; replay from step 0"
        )


def restore_core(
    core: EngineCore[Any],
    checkpoint: SchedulerCheckpoint,
    specs: Mapping[str, RequestSpec],
) -> dict[str, Request]:
    """Put `checkpoint` into the fresh `core`; returns its unfinished requests by id."""
    scheduler = core.scheduler
    assert isinstance(scheduler, SchedulerState), "only the engine's own scheduler"
    assert not scheduler.requests and not core.batch_queue, "restore into a fresh core"
    check_checkpoint(checkpoint, scheduler.config, specs)
    requests = {
        rc.request_id: _restored_request(rc, specs[rc.request_id], core)
        for rc in checkpoint.requests
    }
    scheduler.requests = dict(requests)
    for request_id in checkpoint.waiting:
        scheduler.waiting.add_request(requests[request_id])
    scheduler.running = [requests[request_id] for request_id in checkpoint.running]
    scheduler.finished_req_ids = set(checkpoint.finished_req_ids)
    scheduler.preempted_req_ids = set(checkpoint.preempted_req_ids)
    scheduler.prev_step_scheduled_req_ids = set(checkpoint.prev_step_scheduled_req_ids)
    _restore_blocks(scheduler, checkpoint)
    if checkpoint.pending_batch is not None:
        core.batch_queue.append(_engine_step(checkpoint.pending_batch))
    _restore_cadence(scheduler, checkpoint.prefill_cadence)
    return requests


def _restore_cadence(scheduler: SchedulerState, recorded: CadenceCheckpoint | None) -> None:
    """The prefill cadence's counters (a scheduler that keeps none has nothing to take)."""
    cadence = scheduler.prefill_cadence
    if cadence is None or recorded is None:
        return
    cadence.num_executed_steps = recorded.num_executed_steps
    cadence.last_prefill_step = recorded.last_prefill_step
    cadence.prefill_capacity_bound = recorded.prefill_capacity_bound
    scheduler.deferred_waiting = set(recorded.deferred_req_ids)


def _restored_request(rc: RequestCheckpoint, spec: RequestSpec, core: EngineCore[Any]) -> Request:
    request = core.preprocess_add_request(spec)
    outputs = list(rc.output_token_ids)
    request.output_token_ids = outputs
    request.all_token_ids = [*request.prompt_token_ids, *outputs]
    request.num_tokens = len(request.all_token_ids)
    request.update_block_hashes()
    request.status = rc.status
    request.num_computed_tokens = rc.num_computed_tokens
    request.num_output_placeholders = rc.num_output_placeholders
    request.num_in_flight_tokens = rc.num_in_flight_tokens
    request.num_stale_output_tokens = rc.num_stale_output_tokens
    request.num_preemptions = rc.num_preemptions
    request.is_prefill_chunk = rc.is_prefill_chunk
    request.shared_prefix_boundary = rc.shared_prefix_boundary
    request.spec_token_ids = list(rc.spec_token_ids)
    if request.structured_output_request is not None:
        request.structured_output_request.is_grammar_ready = bool(rc.is_grammar_ready)
    return request


def _restore_blocks(scheduler: SchedulerState, checkpoint: SchedulerCheckpoint) -> None:
    manager = scheduler.kv_cache_manager
    pool = manager.block_pool
    recorded = checkpoint.block_pool
    blocks = pool.blocks
    num_recorded = len(recorded.ref_cnts)
    for block in blocks[:num_recorded]:
        block.ref_cnt = recorded.ref_cnts[block.block_id]
        block.block_hash = recorded.block_hashes[block.block_id]
    free = [blocks[block_id] for block_id in recorded.free_block_ids if block_id < len(blocks)]
    free += blocks[num_recorded:]  # a what-if's extra blocks: never used, at the back
    pool.free_block_queue = FreeKVCacheBlockQueue(free)
    index = pool.cached_block_hash_to_block  # a fresh core's: empty, and bound by its managers
    for block_id in recorded.cached_block_ids:
        if block_id < len(blocks):
            block = blocks[block_id]
            assert block.block_hash is not None
            index.insert(block.block_hash, block)
    if isinstance(manager, KVCacheCoordinator):
        _restore_group_tables(manager, checkpoint, blocks)
        return
    assert isinstance(manager, KVCacheManager)
    for rc in checkpoint.requests:
        if rc.block_ids:
            manager.req_to_blocks[rc.request_id] = [blocks[i] for i in rc.block_ids]
        if rc.num_cached_blocks:
            manager.num_cached_block[rc.request_id] = rc.num_cached_blocks


def _restore_group_tables(
    coordinator: KVCacheCoordinator, checkpoint: SchedulerCheckpoint, blocks: list[KVCacheBlock]
) -> None:
    """Every group's tables, filled in place (the coordinator binds their dicts), and the
    blocks each group holds. `num_tokens_next_skip` stays empty: without an entry the
    running pass calls `remove_skipped_blocks`, which frees nothing freed already and
    sets it again."""
    managers = coordinator.managers
    held: list[set[int]] = [set() for _ in managers]
    for rc in checkpoint.requests:
        tables = zip(managers, held, _tables_by_group(rc), strict=True)
        for manager, group_held, (block_ids, num_cached_blocks) in tables:
            if block_ids:
                manager.req_to_blocks[rc.request_id] = [blocks[i] for i in block_ids]
                group_held.update(block_ids)
            if num_cached_blocks:
                manager.num_cached_block[rc.request_id] = num_cached_blocks
    for manager, group_held in zip(managers, held, strict=True):
        group_held.discard(0)  # null entries
        manager.num_held_blocks = len(group_held)


def _engine_step(batch: PendingBatch) -> EngineStep:
    """The queued batch, as much of it as processing its output reads."""
    num_scheduled_tokens = dict(batch.num_scheduled_tokens)
    output = SchedulerOutput(
        scheduled_new_reqs=(),
        scheduled_cached_reqs=CachedRequestData.empty(),
        num_scheduled_tokens=num_scheduled_tokens,
        total_num_scheduled_tokens=sum(num_scheduled_tokens.values()),
        preempted_req_ids=frozenset(),
        finished_req_ids=frozenset(),
        scheduled_spec_decode_tokens=dict(batch.scheduled_spec_decode_tokens)
        or NO_SPEC_DECODE_TOKENS,
    )
    sampled = {req_id: list(tokens) for req_id, tokens in batch.sampled_token_ids}
    return EngineStep(output, ModelRunnerOutput.from_sampled(sampled), 0, None, 0, 0)


# ----- checks -------------------------------------------------------------------


def check_checkpoint(
    checkpoint: SchedulerCheckpoint, config: EngineConfig, specs: Mapping[str, RequestSpec]
) -> None:
    """Whether a scheduler under `config` can be restored to `checkpoint` (a
    `CheckpointError` naming what cannot be)."""
    where = f"the checkpoint at step {checkpoint.step}"
    for rc in checkpoint.requests:
        _check_request(rc, config, specs, where)
    _check_queues(checkpoint, where)
    _check_blocks(checkpoint, config, where)
    if checkpoint.pending_batch is not None and not config.async_scheduling:
        raise CheckpointError(f"{where}: a batch is queued, but scheduling is synchronous")
    _check_cadence(checkpoint, config, where)


def _check_cadence(checkpoint: SchedulerCheckpoint, config: EngineConfig, where: str) -> None:
    cadence = checkpoint.prefill_cadence
    if cadence is None:
        if config.keeps_prefill_cadence:
            raise CheckpointError(
                f"prefill_schedule_interval: {where} does not hold the prefill cadence's "
                "counters (its recorder did not read them); replay from step 0"
            )
        return
    unfinished = {rc.request_id for rc in checkpoint.requests}
    if not set(cadence.deferred_req_ids) <= unfinished:
        raise CheckpointError(f"{where}: the prefill cadence defers a request it does not hold")
    if cadence.num_executed_steps < 0:
        raise CheckpointError(f"{where}: the prefill cadence's num_executed_steps is negative")


def _check_request(
    rc: RequestCheckpoint, config: EngineConfig, specs: Mapping[str, RequestSpec], where: str
) -> None:
    spec = specs.get(rc.request_id)
    if spec is None:
        raise CheckpointError(f"{where}: request {rc.request_id!r} is not in the trace's requests")
    if RequestStatus.is_finished(rc.status):
        raise CheckpointError(f"{where}: request {rc.request_id!r} is {rc.status}, not unfinished")
    num_tokens = len(spec.prompt_token_ids) + len(rc.output_token_ids)
    if num_tokens >= config.max_model_len:
        raise CheckpointError(
            f"max_model_len: {config.max_model_len} is not above request {rc.request_id!r}'s "
            f"{num_tokens} tokens in {where}"
        )
    most = num_tokens + rc.num_in_flight_tokens + rc.num_output_placeholders
    if not 0 <= rc.num_computed_tokens <= most + len(rc.spec_token_ids):
        raise CheckpointError(
            f"{where}: request {rc.request_id!r}: num_computed_tokens {rc.num_computed_tokens} "
            f"is outside 0..{most} (its tokens, in flight and placeholders)"
        )


def _check_queues(checkpoint: SchedulerCheckpoint, where: str) -> None:
    for queue in ("waiting", "running"):
        positions = [r.queue_position for r in checkpoint.requests if r.queue == queue]
        if sorted(positions) != list(range(len(positions))):
            raise CheckpointError(f"{where}: the {queue} queue's positions are not 0..n-1")
    for name in ("finished_req_ids", "preempted_req_ids", "prev_step_scheduled_req_ids"):
        ids = getattr(checkpoint, name)
        if len(set(ids)) != len(ids):
            raise CheckpointError(f"{where}: {name} names a request twice")


def _tables_by_group(rc: RequestCheckpoint) -> tuple[tuple[tuple[int, ...], int], ...]:
    """The request's block table and `num_cached_blocks` in every KV cache group."""
    return (
        (rc.block_ids, rc.num_cached_blocks),
        *zip(rc.group_block_ids, rc.group_num_cached_blocks, strict=True),
    )


def _check_blocks(checkpoint: SchedulerCheckpoint, config: EngineConfig, where: str) -> None:
    pool = checkpoint.block_pool
    num_blocks = len(pool.ref_cnts)
    if len(pool.block_hashes) != num_blocks or num_blocks < 2:
        raise CheckpointError(f"{where}: the block pool's columns do not describe one pool")
    num_groups = 1 if config.kv_cache_groups is None else len(config.kv_cache_groups)
    lowest = 0 if config.kv_cache_groups is not None else 1  # 0: a window's null entry
    held: Counter[int] = Counter()
    for rc in checkpoint.requests:
        if len(rc.group_block_ids) != num_groups - 1 or len(rc.group_num_cached_blocks) != len(
            rc.group_block_ids
        ):
            raise CheckpointError(
                f"kv_cache_groups: {where} holds {len(rc.group_block_ids) + 1} KV cache groups "
                f"for request {rc.request_id!r}, the config {num_groups}"
            )
        for group_id, (block_ids, num_cached_blocks) in enumerate(_tables_by_group(rc)):
            held.update(block_ids)
            if not 0 <= num_cached_blocks <= len(block_ids):
                raise CheckpointError(
                    f"{where}: request {rc.request_id!r}: KV cache group {group_id}: "
                    f"num_cached_blocks {num_cached_blocks} is more than its "
                    f"{len(block_ids)} blocks"
                )
            if any(not lowest <= block_id < num_blocks for block_id in block_ids):
                raise CheckpointError(
                    f"{where}: request {rc.request_id!r} holds a block outside "
                    f"{lowest}..{num_blocks - 1} in KV cache group {group_id}"
                )
    held.pop(0, None)
    for block_id in range(1, num_blocks):
        if pool.ref_cnts[block_id] != held[block_id]:
            raise CheckpointError(
                f"{where}: block {block_id}: ref_cnt {pool.ref_cnts[block_id]}, but "
                f"{held[block_id]} requests hold it"
            )
    free = [block_id for block_id in range(1, num_blocks) if not held[block_id]]
    if sorted(pool.free_block_ids) != free:
        raise CheckpointError(f"{where}: the free queue is not the blocks no request holds")
    cached = [b for b in range(num_blocks) if pool.block_hashes[b] is not None]
    if sorted(pool.cached_block_ids) != cached:
        raise CheckpointError(f"{where}: the prefix-cache index is not the blocks with a hash")
    if config.num_blocks < num_blocks:
        _check_fewer_blocks(checkpoint, config.num_blocks, where)


def _check_fewer_blocks(checkpoint: SchedulerCheckpoint, num_blocks: int, where: str) -> None:
    for rc in checkpoint.requests:
        dropped = [
            block_id
            for block_ids, _ in _tables_by_group(rc)
            for block_id in block_ids
            if block_id >= num_blocks
        ]
        if dropped:
            raise CheckpointError(
                f"num_blocks: {num_blocks} is fewer than the blocks in use at step "
                f"{checkpoint.step}: request {rc.request_id!r} holds block {dropped[0]}"
            )
