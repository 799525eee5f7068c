"""A checkpoint's rows: `_checkpoints`, `_checkpoint_requests`, `_checkpoint_blocks` and
`_checkpoint_batches` (`schema/tables.sql`), built column by column as Arrow tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from stepscope.engine.checkpoint import CadenceCheckpoint, PendingBatch, SchedulerCheckpoint

_INT = pa.int32()
_TOKENS = pa.list_(pa.int64())
_NO_BATCH = PendingBatch(-1, (), (), ())
_NO_CADENCE = CadenceCheckpoint(
    num_executed_steps=0, last_prefill_step=0, prefill_capacity_bound=False, deferred_req_ids=()
)


@dataclass(frozen=True)
class PendingCheckpoint:
    """A checkpoint as the engine thread hands it over: its rows are built on the writer's
    thread (`TraceWriter`), so the engine pays only for taking the snapshot."""

    checkpoint: SchedulerCheckpoint
    request_index: Mapping[str, int]
    """The index of every request the checkpoint names."""
    take_ns: int

    @staticmethod
    def of(
        checkpoint: SchedulerCheckpoint, request_index: Mapping[str, int], take_ns: int
    ) -> PendingCheckpoint:
        named = (
            *(rc.request_id for rc in checkpoint.requests),
            *checkpoint.finished_req_ids,
            *checkpoint.preempted_req_ids,
            *checkpoint.prev_step_scheduled_req_ids,
            *(req_id for req_id, _ in (checkpoint.pending_batch or _NO_BATCH).num_scheduled_tokens),
            *(checkpoint.prefill_cadence or _NO_CADENCE).deferred_req_ids,
        )
        return PendingCheckpoint(checkpoint, {rid: request_index[rid] for rid in named}, take_ns)

    def tables(self) -> dict[str, pa.Table]:
        return checkpoint_tables(self.checkpoint, self.request_index, self.take_ns)


def pending_checkpoint_tables(pending: Sequence[PendingCheckpoint]) -> dict[str, pa.Table]:
    """Several checkpoints' rows, table by table."""
    built = [checkpoint.tables() for checkpoint in pending]
    names = dict.fromkeys(name for tables in built for name in tables)
    return {
        name: pa.concat_tables([tables[name] for tables in built if name in tables])
        for name in names
    }


def checkpoint_tables(
    checkpoint: SchedulerCheckpoint, request_index: Mapping[str, int], take_ns: int
) -> dict[str, pa.Table]:
    """The checkpoint's rows in each table, requests named by their index."""
    tables = {
        "_checkpoints": _checkpoint_row(checkpoint, request_index, take_ns),
        "_checkpoint_requests": _request_rows(checkpoint, request_index),
        "_checkpoint_blocks": _block_rows(checkpoint),
    }
    if checkpoint.pending_batch is not None:
        tables["_checkpoint_batches"] = _batch_rows(checkpoint, request_index)
    return tables


def _indices(request_ids: tuple[str, ...], request_index: Mapping[str, int]) -> list[int]:
    return sorted(map(request_index.__getitem__, request_ids))


def _checkpoint_row(
    checkpoint: SchedulerCheckpoint, request_index: Mapping[str, int], take_ns: int
) -> pa.Table:
    pending = checkpoint.pending_batch
    return pa.table(
        {
            "step": pa.array([checkpoint.step], _INT),
            "num_requests": pa.array([len(checkpoint.requests)], _INT),
            "num_blocks": pa.array([len(checkpoint.block_pool.ref_cnts)], _INT),
            "finished_req_indices": pa.array(
                [_indices(checkpoint.finished_req_ids, request_index)], pa.list_(_INT)
            ),
            "preempted_req_indices": pa.array(
                [_indices(checkpoint.preempted_req_ids, request_index)], pa.list_(_INT)
            ),
            "prev_step_scheduled_req_indices": pa.array(
                [_indices(checkpoint.prev_step_scheduled_req_ids, request_index)], pa.list_(_INT)
            ),
            "pending_batch_step": pa.array([None if pending is None else pending.step], _INT),
            "take_ns": pa.array([take_ns], pa.int64()),
            **_cadence_columns(checkpoint.prefill_cadence, request_index),
        }
    )


def _cadence_columns(
    cadence: CadenceCheckpoint | None, request_index: Mapping[str, int]
) -> dict[str, pa.Array]:
    """The prefill cadence's counters (NULL: the scheduler kept none)."""
    if cadence is None:
        executed, last, bound, deferred = None, None, None, None
    else:
        executed, last = cadence.num_executed_steps, cadence.last_prefill_step
        bound = cadence.prefill_capacity_bound
        deferred = _indices(cadence.deferred_req_ids, request_index)
    return {
        "num_executed_steps": pa.array([executed], _INT),
        "last_prefill_step": pa.array([last], _INT),
        "prefill_capacity_bound": pa.array([bound], pa.bool_()),
        "deferred_req_indices": pa.array([deferred], pa.list_(_INT)),
    }


def _request_rows(checkpoint: SchedulerCheckpoint, request_index: Mapping[str, int]) -> pa.Table:
    requests = checkpoint.requests
    return pa.table(
        {
            "step": pa.array([checkpoint.step] * len(requests), _INT),
            "request_index": pa.array([request_index[r.request_id] for r in requests], _INT),
            "queue": pa.array([r.queue for r in requests], pa.string()),
            "queue_position": pa.array([r.queue_position for r in requests], _INT),
            "status": pa.array([r.status.name.lower() for r in requests], pa.string()),
            "num_computed_tokens": pa.array([r.num_computed_tokens for r in requests], _INT),
            "output_token_ids": pa.array([r.output_token_ids for r in requests], _TOKENS),
            "num_output_placeholders": pa.array(
                [r.num_output_placeholders for r in requests], _INT
            ),
            "num_in_flight_tokens": pa.array([r.num_in_flight_tokens for r in requests], _INT),
            "num_stale_output_tokens": pa.array(
                [r.num_stale_output_tokens for r in requests], _INT
            ),
            "num_preemptions": pa.array([r.num_preemptions for r in requests], _INT),
            "is_prefill_chunk": pa.array([r.is_prefill_chunk for r in requests], pa.bool_()),
            "spec_token_ids": pa.array([r.spec_token_ids for r in requests], _TOKENS),
            "is_grammar_ready": pa.array([r.is_grammar_ready for r in requests], pa.bool_()),
            "block_ids": pa.array([r.block_ids for r in requests], pa.list_(_INT)),
            "num_cached_blocks": pa.array([r.num_cached_blocks for r in requests], _INT),
            "group_block_ids": pa.array(
                [r.group_block_ids for r in requests], pa.list_(pa.list_(_INT))
            ),
            "group_num_cached_blocks": pa.array(
                [r.group_num_cached_blocks for r in requests], pa.list_(_INT)
            ),
            "shared_prefix_boundary": pa.array([r.shared_prefix_boundary for r in requests], _INT),
        }
    )


def _block_rows(checkpoint: SchedulerCheckpoint) -> pa.Table:
    pool = checkpoint.block_pool
    num_blocks = len(pool.ref_cnts)
    free: list[int | None] = [None] * num_blocks
    for position, block_id in enumerate(pool.free_block_ids):
        free[block_id] = position
    cached: list[int | None] = [None] * num_blocks
    for position, block_id in enumerate(pool.cached_block_ids):
        cached[block_id] = position
    return pa.table(
        {
            "step": pa.array([checkpoint.step] * num_blocks, _INT),
            "block_id": pa.array(range(num_blocks), _INT),
            "ref_cnt": pa.array(pool.ref_cnts, _INT),
            "free_position": pa.array(free, _INT),
            "block_hash": pa.array(pool.block_hashes, pa.binary()),
            "cache_position": pa.array(cached, _INT),
        }
    )


def _batch_rows(checkpoint: SchedulerCheckpoint, request_index: Mapping[str, int]) -> pa.Table:
    batch = checkpoint.pending_batch
    assert batch is not None
    drafts = dict(batch.scheduled_spec_decode_tokens)
    sampled = dict(batch.sampled_token_ids)
    rows = batch.num_scheduled_tokens
    return pa.table(
        {
            "step": pa.array([checkpoint.step] * len(rows), _INT),
            "position": pa.array(range(len(rows)), _INT),
            "request_index": pa.array([request_index[req_id] for req_id, _ in rows], _INT),
            "num_scheduled_tokens": pa.array([n for _, n in rows], _INT),
            "scheduled_draft_token_ids": pa.array(
                [drafts.get(req_id, ()) for req_id, _ in rows], _TOKENS
            ),
            "sampled_token_ids": pa.array([sampled.get(req_id) for req_id, _ in rows], _TOKENS),
        }
    )
