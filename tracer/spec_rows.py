"""A step's `_spec_decode` rows: drafts scheduled, accepted, appended and proposed per request.

One row per request the step scheduled or gave drafts to after it (speculative
decoding on only). Token ids are pseudonymized when the trace is redacted; -1 (a
padding draft or an async placeholder) is not a token and stays -1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stepscope.engine import EngineStep
from stepscope.engine.spec_decode import verified_drafts

from .columns import TableBuffer
from .redact import Redactor


def add_spec_decode(
    buffers: Mapping[str, TableBuffer],
    step: int,
    engine_step: EngineStep,
    request_index: Mapping[str, int],
    redactor: Redactor | None,
) -> None:
    """Append the step's rows to `buffers["_spec_decode"]`."""
    buffer = buffers["_spec_decode"]
    output = engine_step.scheduler_output
    scheduled = output.scheduled_spec_decode_tokens
    verified = verified_drafts(output, engine_step.model_runner_output)
    appended = {o.request_id: o.new_token_ids for o in engine_step.outputs if o.new_token_ids}
    proposed = _proposed(engine_step)
    for req_id in dict.fromkeys([*output.num_scheduled_tokens, *proposed]):
        accepted = verified.get(req_id)
        tokens = appended.get(req_id)
        drafts = proposed.get(req_id)
        buffer.append_row(
            {
                "step": step,
                "request_index": request_index[req_id],
                "scheduled_draft_token_ids": _ids(scheduled.get(req_id, ()), redactor),
                "num_accepted": None if accepted is None else accepted[1],
                "sampled_token_ids": None if tokens is None else _ids(tokens, redactor),
                "proposed_draft_token_ids": None if drafts is None else _ids(drafts, redactor),
            }
        )


def _proposed(engine_step: EngineStep) -> dict[str, Sequence[int]]:
    """The non-empty drafts `update_draft_token_ids` got after the step."""
    draft_token_ids = engine_step.draft_token_ids
    if draft_token_ids is None:
        return {}
    pairs = zip(draft_token_ids.req_ids, draft_token_ids.draft_token_ids, strict=True)
    return {req_id: drafts for req_id, drafts in pairs if drafts}


def _ids(token_ids: Sequence[int], redactor: Redactor | None) -> list[int]:
    if redactor is None:
        return list(token_ids)
    return [token if token == -1 else redactor.token(token) for token in token_ids]
