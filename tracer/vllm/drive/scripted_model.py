"""The scripted model for vLLM's scheduler: each request samples its workload's tape."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PAD_TOKEN_ID = 0
"""Sampled once a request's tape runs out, as the engine's tape model does."""


class VllmTapeRunner:
    """The scripted model: a request past its prefill samples its next tape token.

    The position is read from vLLM's request at run time, so a request
    recomputed after preemption continues its tape where it left off.
    """

    def __init__(self, scheduler: Any, tapes: Mapping[str, Sequence[int]]) -> None:
        self.scheduler = scheduler
        self.tapes = tapes
        self.num_padded_tokens = 0

    def execute_model(self, scheduler_output: Any) -> Any:
        from vllm.v1.outputs import ModelRunnerOutput

        req_ids = list(scheduler_output.num_scheduled_tokens)
        sampled = [self._sample(req_id) for req_id in req_ids]
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={req_id: i for i, req_id in enumerate(req_ids)},
            sampled_token_ids=sampled,
        )

    def _sample(self, req_id: str) -> list[int]:
        request = self.scheduler.requests[req_id]
        if request.is_prefill_chunk:
            return []
        index = request.num_computed_tokens - request.num_prompt_tokens
        tape: Sequence[int] = self.tapes.get(req_id, ())
        if index < len(tape):
            return [tape[index]]
        self.num_padded_tokens += 1
        return [PAD_TOKEN_ID]
