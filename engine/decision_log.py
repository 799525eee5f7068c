"""Per-step decision lines in the oracle's JSON format, so a run diffs against real vLLM.

Field meanings are those of `oracle/README.md`: one object per step, then a
`{"final": ...}` line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .engine_loop import EngineLoop, RequestFinish, StepRecord

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
    cached = output.scheduled_cached_reqs
    new_block_ids: dict[str, list[int]] = {
        new.req_id: list(new.block_ids) for new in output.scheduled_new_reqs
    }
    for req_id, block_ids in zip(cached.req_ids, cached.new_block_ids, strict=True):
        new_block_ids[req_id] = list(block_ids or ())
    computed_before = {new.req_id: new.num_computed_tokens for new in output.scheduled_new_reqs}
    computed_before.update(zip(cached.req_ids, cached.num_computed_tokens, strict=True))
    runner_output = engine_step.model_runner_output
    scheduler = loop.core.scheduler
    line["arrived"] = list(record.arrived)
    if record.aborted:
        line["aborted"] = list(record.aborted)
    line.update(
        num_scheduled_tokens=dict(output.num_scheduled_tokens),
        total_num_scheduled_tokens=output.total_num_scheduled_tokens,
        computed_before=computed_before,
        new_req_ids=[new.req_id for new in output.scheduled_new_reqs],
        resumed_req_ids=[r for r in cached.req_ids if r in cached.resumed_req_ids],
        cached_req_ids=[r for r in cached.req_ids if r not in cached.resumed_req_ids],
        preempted_req_ids=sorted(output.preempted_req_ids, key=order.__getitem__),
        finished_req_ids=sorted(output.finished_req_ids, key=order.__getitem__),
        new_block_ids=new_block_ids,
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
    if record.aborted_before_update:
        line["aborted_before_update"] = list(record.aborted_before_update)
    if record.rejected:
        line["rejected"] = list(record.rejected)
    return line


def final_line(loop: EngineLoop) -> dict[str, Any]:
    return {
        "final": {req_id: finish_json(f) for req_id, f in loop.final().items()},
        "effective_config": loop.workload.config.to_dict(),
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
