"""A model runner whose outputs are scripted per request (conformance, CI, what-if)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .outputs import ModelRunnerOutput
from .request_states import RequestStates
from .scheduler_output import SchedulerOutput

PAD_TOKEN_ID = 0
"""Sampled once a request's tape runs out, as the oracle's fake model does."""


class TapeModelRunner:
    """Each chunk that reaches the end of its known tokens samples the next tape token.

    The index is the number of outputs the request already has, so a request
    recomputed after preemption continues its tape where it left off.
    """

    def __init__(self, tapes: Mapping[str, Sequence[int]]) -> None:
        self.tapes = tapes
        self.request_states = RequestStates()
        self.num_padded_tokens = 0
        """Tokens sampled past the end of a tape (the script had nothing to say)."""

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        sampled: dict[str, list[int]] = {}
        for chunk in self.request_states.update(scheduler_output):
            req_id = chunk.state.req_id
            if not chunk.samples:
                sampled[req_id] = []
                continue
            tape = self.tapes.get(req_id, ())
            index = chunk.state.num_output_tokens
            if index < len(tape):
                token_id = tape[index]
            else:
                token_id = PAD_TOKEN_ID
                self.num_padded_tokens += 1
            self.request_states.append_sampled(req_id, token_id)
            sampled[req_id] = [token_id]
        return ModelRunnerOutput.from_sampled(sampled)
