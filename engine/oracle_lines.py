"""Per-step decision lines in the oracle's JSON format, so a run diffs against real vLLM.

Field meanings are those of `oracle/README.md`: one object per step (under async
scheduling, per `step_with_batch_queue` call), then a `{"final": ...}` line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from .core import EngineStep
from .engine_loop import BatchQueueCall, EngineLoop, RequestFinish, StepRecord
from .kv_cache_coordinator import KVCacheCoordinator
from .scheduled_requests import RequestKind, ScheduledRequests, scheduled_requests
from .spec_lines import (
    draft_fields,
    schedule_spec_fields,
    spec_config_fields,
    trimmed_sampled,
    update_spec_fields,
)
from .step_counts import step_counts

ENGINE_NAME = "stepscope"


def decision_lines(loop: EngineLoop) -> Iterable[dict[str, Any]]:
    """Run the loop, yielding each step's line and then the final line."""
    yield from step_lines(loop)
    yield final_line(loop)


def step_lines(loop: EngineLoop) -> Iterable[dict[str, Any]]:
    """Run the loop, yielding each step's line.

    Under async scheduling a line is one `step_with_batch_queue` call (`call_line`).
    """
    if loop.workload.config.async_scheduling:
        for call in loop.batch_queue_calls():
            yield call_line(call, loop)
    else:
        for record in loop.run():
            yield step_line(record, loop)


def step_line(record: StepRecord, loop: EngineLoop) -> dict[str, Any]:
    """The line for `record`; call it as the record is yielded (queues are read live)."""
    engine_step = record.engine_step
    if engine_step is None:
        return _idle_line(record.step, record.arrived, record.aborted, record.rejected)
    spec = bool(loop.workload.config.num_speculative_tokens)
    line = _head(record.step, record.arrived, record.aborted)
    groups = loop.workload.config.kv_cache_groups is not None
    line.update(_schedule_fields(engine_step, loop.request_index, spec=spec, groups=groups))
    line.update(_cadence_fields(loop))
    line.update(_update_fields(engine_step, spec=spec))
    line.update(_state_fields(loop))
    if spec:
        line.update(update_spec_fields(engine_step))
        line.update(draft_fields(engine_step, loop.core.scheduler))
    return _tail(line, record.aborted_before_update, record.rejected)


def call_line(call: BatchQueueCall, loop: EngineLoop) -> dict[str, Any]:
    """The async line for `call`: what it scheduled, and the update of batch `update_step`.

    Call it as the call is yielded (queues are read live).
    """
    if call.idle:
        return _idle_line(call.step, call.arrived, call.aborted, call.rejected)
    spec = bool(loop.workload.config.num_speculative_tokens)
    line = _head(call.step, call.arrived, call.aborted)
    line["scheduled"] = call.scheduled is not None
    if call.scheduled is not None:
        groups = loop.workload.config.kv_cache_groups is not None
        line.update(_schedule_fields(call.scheduled, loop.request_index, spec=spec, groups=groups))
        line.update(_cadence_fields(loop))
    line["update_step"] = call.update_step
    if call.processed is None:
        line.update(sampled={}, finished_this_step=[])
    else:
        line.update(_update_fields(call.processed, spec=spec))
    line.update(_state_fields(loop))
    requests = loop.core.scheduler.requests
    line["num_output_placeholders"] = {
        req_id: request.num_output_placeholders for req_id, request in requests.items()
    }
    if spec:
        line.update(update_spec_fields(call.processed))
    return _tail(line, call.aborted_before_update, call.rejected)


def _idle_line(
    step: int, arrived: Sequence[str], aborted: Sequence[str], rejected: Sequence[str]
) -> dict[str, Any]:
    line: dict[str, Any] = {"step": step, "idle": True, "arrived": list(arrived)}
    if aborted:
        line["aborted"] = list(aborted)
    if rejected:
        line["rejected"] = list(rejected)
    return line


def _head(step: int, arrived: Sequence[str], aborted: Sequence[str]) -> dict[str, Any]:
    line: dict[str, Any] = {"step": step, "arrived": list(arrived)}
    if aborted:
        line["aborted"] = list(aborted)
    return line


def _tail(
    line: dict[str, Any], aborted_before_update: Sequence[str], rejected: Sequence[str]
) -> dict[str, Any]:
    if aborted_before_update:
        line["aborted_before_update"] = list(aborted_before_update)
    if rejected:
        line["rejected"] = list(rejected)
    return line


def _schedule_fields(
    engine_step: EngineStep, order: dict[str, int], *, spec: bool, groups: bool
) -> dict[str, Any]:
    """What `schedule()` decided for the step, as the oracle lists it."""
    output, counts = engine_step.scheduler_output, step_counts(engine_step)
    oracle_order = _oracle_order(scheduled_requests(output))
    fields = {
        "num_scheduled_tokens": dict(output.num_scheduled_tokens),
        "total_num_scheduled_tokens": counts.num_scheduled_tokens,
        "computed_before": {row.req_id: row.num_computed_tokens for row in oracle_order},
        "new_req_ids": [row.req_id for row in oracle_order if row.kind is RequestKind.NEW],
        "resumed_req_ids": [row.req_id for row in oracle_order if row.kind is RequestKind.RESUMED],
        "cached_req_ids": [row.req_id for row in oracle_order if row.kind is RequestKind.RUNNING],
        "preempted_req_ids": sorted(output.preempted_req_ids, key=order.__getitem__),
        "finished_req_ids": sorted(output.finished_req_ids, key=order.__getitem__),
        "new_block_ids": {row.req_id: list(row.new_block_ids or ()) for row in oracle_order},
        "num_free_blocks": counts.num_free_blocks_after_schedule,
    }
    if spec:
        fields.update(schedule_spec_fields(output))
    if groups:
        fields["new_block_ids_by_group"] = {
            row.req_id: [list(ids) for ids in output.new_block_ids_by_group[row.req_id]]
            for row in oracle_order
        }
    return fields


def _cadence_fields(loop: EngineLoop) -> dict[str, Any]:
    """The prefill cadence's counters after `schedule()`, when `prefill_schedule_interval`
    is set and this version's scheduler keeps them (an update never changes them)."""
    cadence = loop.core.scheduler.prefill_cadence
    return {} if cadence is None else {"prefill_cadence": cadence.fields()}


def _update_fields(engine_step: EngineStep, *, spec: bool) -> dict[str, Any]:
    """What the model sampled for the batch, and which requests its update finished.

    With speculative decoding a stop inside the drafts trims `sampled` as vLLM does.
    """
    runner_output = engine_step.model_runner_output
    sampled = {
        req_id: list(tokens)
        for req_id, tokens in zip(
            runner_output.req_ids, runner_output.sampled_token_ids, strict=True
        )
        if tokens
    }
    if spec:
        sampled.update(trimmed_sampled(sampled, engine_step).get("sampled", {}))
    return {
        "sampled": sampled,
        "finished_this_step": [o.request_id for o in engine_step.outputs if o.finish_reason],
    }


def _state_fields(loop: EngineLoop) -> dict[str, Any]:
    """The scheduler's queues and counts at the end of the step (after any update)."""
    scheduler = loop.core.scheduler
    fields: dict[str, Any] = {
        "running": [r.request_id for r in scheduler.running],
        "waiting": [r.request_id for r in scheduler.waiting],
        "num_computed_tokens": {
            req_id: request.num_computed_tokens for req_id, request in scheduler.requests.items()
        },
        "num_free_blocks_after_update": scheduler.kv_cache_manager.get_num_free_blocks(),
    }
    manager = scheduler.kv_cache_manager
    if isinstance(manager, KVCacheCoordinator):
        fields["block_tables"] = _block_tables(manager, scheduler.requests)
    return fields


def _block_tables(manager: KVCacheCoordinator, requests: Iterable[str]) -> dict[str, Any]:
    """Every group's table of each request holding blocks (0: a null entry)."""
    tables = {req_id: manager.block_ids_by_group(req_id) for req_id in requests}
    return {req_id: [list(ids) for ids in table] for req_id, table in tables.items() if any(table)}


class _Row(NamedTuple):
    req_id: str
    kind: RequestKind
    num_computed_tokens: int
    new_block_ids: Sequence[int] | None


_ORACLE_RANK = {RequestKind.NEW: 0, RequestKind.RUNNING: 1, RequestKind.RESUMED: 2}


def _oracle_order(requests: ScheduledRequests) -> list[_Row]:
    """The rows as the oracle lists them: new requests, then the cached (running, then
    resumed) ones, each in output order."""
    rows = map(
        _Row,
        requests.req_ids,
        requests.kinds,
        requests.num_computed_tokens,
        requests.new_block_ids,
    )
    return sorted(rows, key=lambda row: _ORACLE_RANK[row.kind])


def final_line(loop: EngineLoop) -> dict[str, Any]:
    final = {req_id: finish_json(f) for req_id, f in loop.final().items()}
    return {"final": final, **_run_fields(loop)}


def final_line_text(loop: EngineLoop) -> Iterator[str]:
    """`json.dumps(final_line(loop))` in pieces, a request at a time: the same text, without
    every request's output tokens made JSON at once (a long run's final line lists millions)."""
    yield '{"final": {'
    separator = ""
    for req_id, finish in loop.final().items():
        yield f"{separator}{json.dumps(req_id)}: {json.dumps(finish_json(finish))}"
        separator = ", "
    yield "}, " + json.dumps(_run_fields(loop))[1:]


def _run_fields(loop: EngineLoop) -> dict[str, Any]:
    """The final line's fields after `final`."""
    return {
        "effective_config": {
            **loop.workload.config.to_dict(),
            **spec_config_fields(loop.workload.config),
        },
        "engine": ENGINE_NAME,
        "emulates_vllm": loop.workload.config.vllm_version,
    }


def finish_json(finish: RequestFinish) -> dict[str, Any]:
    out: dict[str, Any] = {
        "finish_step": finish.finish_step,
        "finish_reason": None if finish.finish_reason is None else str(finish.finish_reason),
        "output_token_ids": list(finish.output_token_ids),
        "num_preemptions": finish.num_preemptions,
    }
    if finish.error is not None:
        out["error"] = finish.error
    if finish.stop_reason is not None:
        out["stop_reason"] = finish.stop_reason
    return out
