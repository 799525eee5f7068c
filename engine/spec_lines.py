"""The oracle line's speculative-decoding fields (only when spec decoding is on).

A schedule's `scheduled_spec_decode_tokens`; an update's `num_accepted_tokens` and
`num_rejected_tokens` (requests whose drafts the updated batch verified); and, under
synchronous scheduling, the `draft_token_ids` handed to `update_draft_token_ids` after
the step and each unfinished request's `spec_token_ids` after that.
"""

from __future__ import annotations

from typing import Any

from .config import EngineConfig
from .core import EngineStep
from .scheduler import Scheduler
from .scheduler_output import SchedulerOutput
from .spec_decode import verified_drafts


def schedule_spec_fields(output: SchedulerOutput) -> dict[str, Any]:
    return {
        "scheduled_spec_decode_tokens": {
            req_id: list(tokens) for req_id, tokens in output.scheduled_spec_decode_tokens.items()
        }
    }


def update_spec_fields(processed: EngineStep | None) -> dict[str, Any]:
    """Drafts verified by the batch an update processed (None: no update this step)."""
    verified = (
        verified_drafts(processed.scheduler_output, processed.model_runner_output)
        if processed is not None
        else {}
    )
    return {
        "num_accepted_tokens": {req_id: a for req_id, (_, a) in verified.items()},
        "num_rejected_tokens": {req_id: d - a for req_id, (d, a) in verified.items()},
    }


def draft_fields(engine_step: EngineStep, scheduler: Scheduler) -> dict[str, Any]:
    """Synchronous only: the drafts proposed after the step, and every request's drafts now."""
    proposed = engine_step.draft_token_ids
    return {
        "draft_token_ids": {}
        if proposed is None
        else {
            req_id: list(drafts)
            for req_id, drafts in zip(proposed.req_ids, proposed.draft_token_ids, strict=True)
            if drafts
        },
        "spec_token_ids": {
            req_id: list(request.spec_token_ids)
            for req_id, request in scheduler.requests.items()
            if request.spec_token_ids
        },
    }


def trimmed_sampled(sampled: dict[str, list[int]], processed: EngineStep) -> dict[str, Any]:
    """`sampled` as vLLM leaves it: a stop inside the drafts trims the list in place."""
    trimmed = {
        output.request_id: list(output.new_token_ids)
        for output in processed.outputs
        if output.finish_reason is not None and output.request_id in sampled
    }
    return {"sampled": {**sampled, **trimmed}} if trimmed else {}


def spec_config_fields(config: EngineConfig) -> dict[str, Any]:
    """What the oracle's `effective_config` adds with spec decoding on."""
    if not config.num_speculative_tokens:
        return {}
    fields: dict[str, Any] = {
        "max_num_new_slots_for_drafting": config.max_num_new_slots_for_drafting,
        "num_lookahead_tokens": config.num_lookahead_tokens,
    }
    if config.use_eagle or config.parallel_drafting or config.mtp_num_modules is not None:
        fields.update(
            parallel_drafting=config.parallel_drafting,
            num_prefill_lookahead_tokens=config.num_prefill_lookahead_tokens,
            num_hash_lookahead_tokens=config.num_hash_lookahead_tokens,
            use_eagle_block_drop=config.use_eagle_block_drop,
        )
    return fields
