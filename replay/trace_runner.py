"""The recording's own model for a replay with speculative decoding: its verdicts and drafts.

A request's tokens come from its tape, as in `TapeModelRunner`; what speculative
decoding adds comes from `_spec_decode`, matched by the request's n-th scheduling:
how many of the scheduled drafts the model accepted (so how many tokens the step
appends, and how far `num_computed_tokens` rolls back), and the drafts the drafter
proposed after the step, handed to the scheduler as `post_step` hands them. The
recorded count, not a comparison with the tape, decides acceptance, so an async
step's placeholder drafts verify as the worker's real drafts did.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stepscope.engine.outputs import DraftTokenIds, ModelRunnerOutput
from stepscope.engine.request_states import RequestStates
from stepscope.engine.scheduler_output import SchedulerOutput
from stepscope.engine.tape_runner import PAD_TOKEN_ID
from stepscope.schema import Trace

from .sql import query


@dataclass(frozen=True, slots=True)
class RecordedVerdict:
    """One scheduling of a request, as the recording's model answered it."""

    num_accepted: int | None
    num_sampled: int
    proposed: tuple[int, ...] | None


def recorded_verdicts(trace: Trace) -> dict[str, deque[RecordedVerdict]]:
    """Each request's verdicts in the order it was scheduled (`sql/recorded_drafts.sql`)."""
    verdicts: dict[str, deque[RecordedVerdict]] = defaultdict(deque)
    for request_id, accepted, sampled, proposed in trace.sql(query("recorded_drafts")).fetchall():
        drafts = None if proposed is None else tuple(proposed)
        verdicts[request_id].append(RecordedVerdict(accepted, sampled, drafts))
    return dict(verdicts)


class TraceModelRunner:
    """Samples each request's tape as many tokens at a time as the recording accepted."""

    def __init__(
        self,
        tapes: Mapping[str, Sequence[int]],
        verdicts: Mapping[str, deque[RecordedVerdict]],
    ) -> None:
        self.tapes = tapes
        self.verdicts = verdicts
        self.request_states = RequestStates()
        self.num_padded_tokens = 0
        self._drafts: DraftTokenIds | None = None

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        sampled: dict[str, list[int]] = {}
        proposed: dict[str, tuple[int, ...] | None] = {}
        scheduled_drafts = scheduler_output.scheduled_spec_decode_tokens
        for chunk in self.request_states.update(scheduler_output):
            req_id = chunk.state.req_id
            verdict = self._next_verdict(req_id)
            proposed[req_id] = None if verdict is None else verdict.proposed
            if not chunk.samples:
                sampled[req_id] = []
                continue
            num_drafts = len(scheduled_drafts.get(req_id, ()))
            tokens = self._sample(req_id, chunk.state.num_output_tokens, num_drafts, verdict)
            for token_id in tokens:
                self.request_states.append_sampled(req_id, token_id)
            sampled[req_id] = tokens
        self._drafts = _draft_token_ids(proposed)
        return ModelRunnerOutput.from_sampled(sampled)

    def take_draft_token_ids(self) -> DraftTokenIds | None:
        """The drafts recorded after the step just run (None where none were handed over)."""
        drafts, self._drafts = self._drafts, None
        return drafts

    def _next_verdict(self, req_id: str) -> RecordedVerdict | None:
        queue = self.verdicts.get(req_id)
        return queue.popleft() if queue else None

    def _sample(
        self, req_id: str, index: int, num_drafts: int, verdict: RecordedVerdict | None
    ) -> list[int]:
        """Accepted drafts, then the bonus token: the tape's next `accepted + 1` tokens."""
        accepted = 0
        if num_drafts and verdict is not None and verdict.num_accepted is not None:
            accepted = min(verdict.num_accepted, num_drafts)
        tape = self.tapes.get(req_id, ())
        tokens = [
            tape[i] if i < len(tape) else PAD_TOKEN_ID for i in range(index, index + accepted + 1)
        ]
        self.num_padded_tokens += max(0, index + accepted + 1 - len(tape))
        return tokens


def _draft_token_ids(proposed: Mapping[str, tuple[int, ...] | None]) -> DraftTokenIds | None:
    """What `update_draft_token_ids` got after the step; None when the recording had nothing."""
    if all(drafts is None for drafts in proposed.values()):
        return None
    req_ids = tuple(proposed)
    return DraftTokenIds(req_ids, tuple(proposed[req_id] or () for req_id in req_ids))
