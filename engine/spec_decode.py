"""Speculative decoding as vLLM 0.33.0's scheduler sees it: drafts scheduled, padded, verified.

A request's drafts (`spec_token_ids`) are extra tokens past its known ones; the
running pass schedules as many as the budget leaves and hands them out in
`scheduled_spec_decode_tokens`. A new request with one token left to compute is
padded to `1 + k` with -1 drafts (`pad_spec_decode`, so the batch stays uniform). At
the update, rejected drafts roll `num_computed_tokens` (and async placeholders) back.
"""

from __future__ import annotations

from .outputs import ModelRunnerOutput
from .request import Request
from .scheduler_output import SchedulerOutput
from .step_plan import StepPlan


def schedule_drafts(request: Request, num_new_tokens: int, plan: StepPlan) -> None:
    """After a running request is scheduled: the drafts its tokens cover, then none left.

    New drafts come from `update_draft_token_ids` before the next step, if at all.
    """
    plan.prefill_scheduled |= request.is_prefill_chunk
    spec_token_ids = request.spec_token_ids
    if not spec_token_ids:
        return
    num_scheduled_spec_tokens = (
        num_new_tokens
        + request.num_computed_tokens
        - request.num_tokens
        - request.num_output_placeholders
    )
    if num_scheduled_spec_tokens > 0:
        plan.scheduled_spec_decode_tokens[request.request_id] = tuple(
            spec_token_ids[:num_scheduled_spec_tokens]
        )
    request.spec_token_ids = []


def pad_spec_decode(
    num_computed_tokens: int,
    num_spec_tokens: int,
    max_model_len: int,
    request_token_budget: int,
    plan: StepPlan,
) -> int | None:
    """Tokens for an admission with one token left: `1 + k` when padded, else 1.

    Padded only behind a scheduled decode or a prefix hit, never next to a running
    prefill, and only if the sampled token still fits in `max_model_len`. None: the
    padded request does not fit the budget, and vLLM admits nobody more this step
    rather than schedule it unpadded.
    """
    if plan.prefill_scheduled or not (plan.scheduled_running or num_computed_tokens > 0):
        return 1
    padded_num_tokens = 1 + num_spec_tokens
    if num_computed_tokens + padded_num_tokens + 1 > max_model_len:
        return 1
    if padded_num_tokens > request_token_budget:
        return None
    return padded_num_tokens


def roll_back_rejected(request: Request, num_drafts: int, num_generated: int) -> None:
    """Forget the positions of the drafts the model rejected (and their async placeholders).

    The model returns the accepted drafts plus one token, so `num_drafts` scheduled and
    `num_generated` returned leave `num_drafts - (num_generated - 1)` rejected.
    """
    num_rejected_tokens = num_drafts - max(num_generated - 1, 0)
    if request.num_computed_tokens > 0:
        request.num_computed_tokens -= num_rejected_tokens
    if request.num_output_placeholders > 0:
        request.num_output_placeholders -= num_rejected_tokens


def verified_drafts(
    scheduler_output: SchedulerOutput, model_runner_output: ModelRunnerOutput
) -> dict[str, tuple[int, int]]:
    """(drafts scheduled, drafts accepted) of each request whose drafts the step verified."""
    spec = scheduler_output.scheduled_spec_decode_tokens
    if not spec:
        return {}
    sampled = model_runner_output.sampled_token_ids
    index_of = model_runner_output.req_id_to_index
    verified = {}
    for request_id, drafts in spec.items():
        index = index_of.get(request_id)
        generated = sampled[index] if index is not None and sampled else ()
        if drafts and generated:
            verified[request_id] = (len(drafts), len(generated) - 1)
    return verified
