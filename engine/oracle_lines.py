"""Per-step decision lines in the oracle's JSON format, so a run diffs against real vLLM.

Field meanings are those of `oracle/README.md`: one object per step, then a
`{"final": ...}` line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from .engine_loop import EngineLoop, RequestFinish, StepRecord
from .scheduled_requests import RequestKind, ScheduledRequests, scheduled_requests
from .spec_lines import spec_config_fields, sync_spec_fields

ENGINE_NAME = "stepscope"


def decision_lines(loop: EngineLoop) -> Iterable[dict[str, Any]]:
    """Run the loop, yielding each step's line and then the final line."""
    for record in loop.run():
        yield step_line(record, loop)
    yield final_line(loop)


def step_line(record: StepRecord, loop: EngineLoop) -> dict[str, Any]:
    """The line for `record`; call it as the record is yielded (queues are read live)."""
    line: dict[str, Any] = {"step": record.step}
    engine_step = record.engine_step
    if engine_step is None:
        line.update(idle=True, arrived=list(record.arrived))
        if record.aborted:
            line["aborted"] = list(record.aborted)
        if record.rejected:
            line["rejected"] = list(record.rejected)
        return line
    order = loop.request_index
    output = engine_step.scheduler_output
    oracle_order = _oracle_order(scheduled_requests(output))
    runner_output = engine_step.model_runner_output
    scheduler = loop.core.scheduler
    line["arrived"] = list(record.arrived)
    if record.aborted:
        line["aborted"] = list(record.aborted)
    line.update(
        num_scheduled_tokens=dict(output.num_scheduled_tokens),
        total_num_scheduled_tokens=output.total_num_scheduled_tokens,
        computed_before={row.req_id: row.num_computed_tokens for row in oracle_order},
        new_req_ids=[row.req_id for row in oracle_order if row.kind is RequestKind.NEW],
        resumed_req_ids=[row.req_id for row in oracle_order if row.kind is RequestKind.RESUMED],
        cached_req_ids=[row.req_id for row in oracle_order if row.kind is RequestKind.RUNNING],
        preempted_req_ids=sorted(output.preempted_req_ids, key=order.__getitem__),
        finished_req_ids=sorted(output.finished_req_ids, key=order.__getitem__),
        new_block_ids={row.req_id: list(row.new_block_ids or ()) for row in oracle_order},
        num_free_blocks=engine_step.num_free_blocks_after_schedule,
        sampled={
            req_id: list(tokens)
            for req_id, tokens in zip(
                runner_output.req_ids, runner_output.sampled_token_ids, strict=True
            )
            if tokens
        },
        finished_this_step=[o.request_id for o in engine_step.outputs if o.finish_reason],
        running=[r.request_id for r in scheduler.running],
        waiting=[r.request_id for r in scheduler.waiting],
        num_computed_tokens={
            req_id: request.num_computed_tokens for req_id, request in scheduler.requests.items()
        },
        num_free_blocks_after_update=scheduler.kv_cache_manager.get_num_free_blocks(),
    )
    if loop.workload.config.num_speculative_tokens:
        line.update(sync_spec_fields(engine_step, scheduler, line["sampled"]))
    if record.aborted_before_update:
        line["aborted_before_update"] = list(record.aborted_before_update)
    if record.rejected:
        line["rejected"] = list(record.rejected)
    return line


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
    return {
        "final": {req_id: finish_json(f) for req_id, f in loop.final().items()},
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
