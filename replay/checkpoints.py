"""A trace's checkpoints read back: which steps have one, and the state at one of them.

A checkpoint's rows are checked as they are read: a NULL where the recorder always
writes a value, a request index that names no request, or row counts that disagree with
the checkpoint's own row make it a damaged checkpoint, named in one line. Whether the
state is one a scheduler could be in is checked when it is restored (`engine/restore.py`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from stepscope.engine import InputError, RequestStatus
from stepscope.engine.checkpoint import (
    BlockPoolCheckpoint,
    CadenceCheckpoint,
    PendingBatch,
    RequestCheckpoint,
    SchedulerCheckpoint,
)
from stepscope.schema import Trace

from .sql import query

_REQUIRED_REQUEST_COLUMNS = (
    "request_id",
    "queue",
    "queue_position",
    "status",
    "num_computed_tokens",
    "output_token_ids",
    "num_output_placeholders",
    "num_in_flight_tokens",
    "num_stale_output_tokens",
    "num_preemptions",
    "is_prefill_chunk",
    "spec_token_ids",
    "block_ids",
    "num_cached_blocks",
    "group_block_ids",
    "group_num_cached_blocks",
    "shared_prefix_boundary",
)
"""`_checkpoint_requests` columns the recorder always fills (`is_grammar_ready` may be NULL)."""


class CheckpointReadError(InputError):
    """A checkpoint's rows are damaged."""


@dataclass(frozen=True)
class CheckpointInfo:
    step: int
    num_requests: int
    num_blocks: int
    pending_batch_step: int | None
    take_ns: int | None


def checkpoint_infos(trace: Trace) -> list[CheckpointInfo]:
    """Every checkpoint of the trace, by step (none in a trace older than schema 6)."""
    rows = trace.sql(query("checkpoint_steps")).fetchall()
    if any(row[0] is None for row in rows):
        raise CheckpointReadError(f"{trace.path}: _checkpoints.step is NULL in a row")
    return [CheckpointInfo(*row) for row in rows]


def checkpoint_steps(trace: Trace) -> list[int]:
    return [info.step for info in checkpoint_infos(trace)]


def nearest_checkpoint(steps: list[int], step: int) -> int | None:
    """The latest of `steps` (sorted) at or before `step`; None if there is none."""
    index = bisect.bisect_right(steps, step)
    return steps[index - 1] if index else None


def read_checkpoint(trace: Trace, step: int) -> SchedulerCheckpoint:
    """The state the trace's checkpoint at `step` holds."""
    where = f"{trace.path}: the checkpoint at step {step}"
    rows = trace.sql(query("checkpoint_row"), [step]).fetchall()
    if not rows:
        raise CheckpointReadError(f"{where} does not exist")
    num_requests, num_blocks, finished, preempted, previous, pending_step = rows[0]
    for name, value in (
        ("num_requests", num_requests),
        ("num_blocks", num_blocks),
        ("finished_req_indices", finished),
        ("preempted_req_indices", preempted),
        ("prev_step_scheduled_req_indices", previous),
    ):
        if value is None or (isinstance(value, list) and None in value):
            raise CheckpointReadError(f"{where}: _checkpoints.{name} is NULL or names no request")
    requests = _requests(trace, step, where)
    if len(requests) != num_requests:
        raise CheckpointReadError(
            f"{where}: {len(requests)} _checkpoint_requests rows, its row says {num_requests}"
        )
    return SchedulerCheckpoint(
        step=step,
        requests=requests,
        finished_req_ids=tuple(sorted(finished)),
        preempted_req_ids=tuple(sorted(preempted)),
        prev_step_scheduled_req_ids=tuple(sorted(previous)),
        block_pool=_block_pool(trace, step, num_blocks, where),
        pending_batch=None if pending_step is None else _batch(trace, step, pending_step, where),
        prefill_cadence=_cadence(trace, step, where),
    )


CADENCE_SCHEMA_VERSION = 9
"""The first schema whose checkpoints can hold the prefill cadence."""


def _cadence(trace: Trace, step: int, where: str) -> CadenceCheckpoint | None:
    if trace.schema_version < CADENCE_SCHEMA_VERSION:
        return None
    [(executed, last, bound, deferred)] = trace.sql(query("checkpoint_cadence"), [step]).fetchall()
    if executed is None:
        return None
    if last is None or bound is None or deferred is None or None in deferred:
        raise CheckpointReadError(
            f"{where}: the prefill cadence's columns are NULL in part, or name no request"
        )
    return CadenceCheckpoint(executed, last, bound, tuple(sorted(deferred)))


def _requests(trace: Trace, step: int, where: str) -> tuple[RequestCheckpoint, ...]:
    table = trace.sql(query("checkpoint_requests"), [step]).to_arrow_table()
    columns = _checked_columns(table, _REQUIRED_REQUEST_COLUMNS, "_checkpoint_requests", where)
    grammar = table["is_grammar_ready"].to_pylist()
    return tuple(
        RequestCheckpoint(
            request_id=columns["request_id"][i],
            queue=columns["queue"][i],
            queue_position=columns["queue_position"][i],
            status=_status(columns["status"][i], where),
            num_computed_tokens=columns["num_computed_tokens"][i],
            output_token_ids=tuple(columns["output_token_ids"][i]),
            num_output_placeholders=columns["num_output_placeholders"][i],
            num_in_flight_tokens=columns["num_in_flight_tokens"][i],
            num_stale_output_tokens=columns["num_stale_output_tokens"][i],
            num_preemptions=columns["num_preemptions"][i],
            is_prefill_chunk=columns["is_prefill_chunk"][i],
            spec_token_ids=tuple(columns["spec_token_ids"][i]),
            is_grammar_ready=grammar[i],
            block_ids=tuple(columns["block_ids"][i]),
            num_cached_blocks=columns["num_cached_blocks"][i],
            group_block_ids=_group_block_ids(columns["group_block_ids"][i], where),
            group_num_cached_blocks=tuple(columns["group_num_cached_blocks"][i]),
            shared_prefix_boundary=columns["shared_prefix_boundary"][i],
        )
        for i in range(table.num_rows)
    )


def _group_block_ids(tables: list[list[int]], where: str) -> tuple[tuple[int, ...], ...]:
    if any(table is None or None in table for table in tables):
        raise CheckpointReadError(f"{where}: _checkpoint_requests.group_block_ids holds a NULL")
    return tuple(map(tuple, tables))


def _status(name: str, where: str) -> RequestStatus:
    try:
        return RequestStatus[name.upper()]
    except KeyError:
        raise CheckpointReadError(f"{where}: unknown request status {name!r}") from None


def _block_pool(trace: Trace, step: int, num_blocks: int, where: str) -> BlockPoolCheckpoint:
    table = trace.sql(query("checkpoint_blocks"), [step]).to_arrow_table()
    ids = table["block_id"].to_pylist()
    if ids != list(range(num_blocks)):
        raise CheckpointReadError(
            f"{where}: _checkpoint_blocks does not hold blocks 0..{num_blocks - 1} once each"
        )
    ref_cnts = table["ref_cnt"].to_pylist()
    if None in ref_cnts:
        raise CheckpointReadError(f"{where}: _checkpoint_blocks.ref_cnt is NULL in a row")
    return BlockPoolCheckpoint(
        ref_cnts=tuple(ref_cnts),
        block_hashes=tuple(table["block_hash"].to_pylist()),
        free_block_ids=_in_order(table, "free_position", where),
        cached_block_ids=_in_order(table, "cache_position", where),
    )


def _in_order(table: pa.Table, column: str, where: str) -> tuple[int, ...]:
    """The block ids whose `column` is set, in its order (0..n-1 once each, or damaged)."""
    placed = sorted(
        (position, block_id)
        for block_id, position in enumerate(table[column].to_pylist())
        if position is not None
    )
    if [position for position, _ in placed] != list(range(len(placed))):
        raise CheckpointReadError(f"{where}: _checkpoint_blocks.{column} is not 0..n-1 once each")
    return tuple(block_id for _, block_id in placed)


def _batch(trace: Trace, step: int, pending_step: int, where: str) -> PendingBatch:
    rows = trace.sql(query("checkpoint_batch"), [step]).fetchall()
    if any(row[0] is None or row[1] is None or row[2] is None for row in rows):
        raise CheckpointReadError(f"{where}: a _checkpoint_batches row is damaged (a NULL)")
    return PendingBatch(
        step=pending_step,
        num_scheduled_tokens=tuple((req_id, n) for req_id, n, _, _ in rows),
        scheduled_spec_decode_tokens=tuple(
            (req_id, tuple(drafts)) for req_id, _, drafts, _ in rows if drafts
        ),
        sampled_token_ids=tuple(
            (req_id, tuple(sampled)) for req_id, _, _, sampled in rows if sampled is not None
        ),
    )


def _checked_columns(
    table: pa.Table, names: tuple[str, ...], name: str, where: str
) -> dict[str, list[Any]]:
    columns = {}
    for column in names:
        values = table[column]
        if values.null_count:
            raise CheckpointReadError(
                f"{where}: {name}.{column} is NULL in a row"
                + (" (a request index that names no request)" if column == "request_id" else "")
            )
        columns[column] = values.to_pylist()
    return columns
