"""A model runner whose outputs are scripted per request (conformance, CI, what-if)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .checkpoint import SchedulerCheckpoint
from .outputs import DraftTokenIds, ModelRunnerOutput
from .request import RequestStatus
from .request_states import RequestStates
from .scheduler_output import SchedulerOutput
from .tape_drafter import DraftScript, TapeDrafter, tape_token
from .workload import RequestSpec, Workload

PAD_TOKEN_ID = 0
"""Sampled once a request's tape runs out, as the oracle's fake model does."""


class TapeModelRunner:
    """Each chunk that reaches the end of its known tokens samples the next tape token.

    The index is the number of outputs the request already has, so a request
    recomputed after preemption continues its tape where it left off. With a
    drafter (speculative decoding), a step verifies the request's scheduled drafts
    against the tape, samples the accepted ones plus a bonus token, and proposes
    the next drafts; -1 drafts (async placeholders) are the runner's own latest ones.
    """

    def __init__(self, tapes: Mapping[str, Sequence[int]], drafter: TapeDrafter | None = None):
        self.tapes = tapes
        self.drafter = drafter
        self.request_states = RequestStates()
        self.num_padded_tokens = 0
        """Tokens sampled past the end of a tape (the script had nothing to say)."""
        self._latest_drafts: dict[str, tuple[int, tuple[int, ...]]] = {}
        """Each request's last proposal: the output index it starts at, and the drafts."""
        self._draft_token_ids: DraftTokenIds | None = None

    @classmethod
    def for_workload(cls, workload: Workload) -> TapeModelRunner:
        """The tapes of `workload`, with its draft scripts when spec decoding is on."""
        tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
        k = workload.config.num_speculative_tokens
        if not k:
            return cls(tapes)
        scripts = {
            spec.request_id: DraftScript(spec.draft_mismatch_every, spec.draft_accept)
            for spec in workload.requests
            if spec.draft_mismatch_every is not None or spec.draft_accept is not None
        }
        return cls(tapes, TapeDrafter(k, scripts, PAD_TOKEN_ID))

    def resume(
        self,
        checkpoint: SchedulerCheckpoint,
        specs: Mapping[str, RequestSpec],
        latest_drafts: Mapping[str, tuple[int, tuple[int, ...]]] | None = None,
    ) -> None:
        """Take up a run at `checkpoint`: the runner's view of each request it has run is
        the scheduler's, plus what the queued batch sampled (async scheduling);
        `latest_drafts` are requests' last proposals (output index, drafts)."""
        batch = checkpoint.pending_batch
        in_flight = dict(batch.sampled_token_ids) if batch is not None else {}
        for rc in checkpoint.requests:
            if rc.status in (RequestStatus.RUNNING, RequestStatus.PREEMPTED):
                tokens = (*rc.output_token_ids, *in_flight.get(rc.request_id, ()))
                self.request_states.resume(specs[rc.request_id], tokens, rc.block_ids)
        self._latest_drafts.update(latest_drafts or {})

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        if self.drafter is not None:
            return self._execute_with_drafts(scheduler_output, self.drafter)
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

    def take_draft_token_ids(self) -> DraftTokenIds | None:
        """The drafts proposed in the last step, once (vLLM's worker call)."""
        draft_token_ids, self._draft_token_ids = self._draft_token_ids, None
        return draft_token_ids

    def _tape_token(self, req_id: str, index: int) -> int:
        tape = self.tapes.get(req_id, ())
        if index >= len(tape):
            self.num_padded_tokens += 1
        return tape_token(tape, index, PAD_TOKEN_ID)

    def _execute_with_drafts(
        self, scheduler_output: SchedulerOutput, drafter: TapeDrafter
    ) -> ModelRunnerOutput:
        self._forget_drafts_of_reset_requests(scheduler_output)
        spec = scheduler_output.scheduled_spec_decode_tokens
        sampled: dict[str, list[int]] = {}
        proposals: dict[str, tuple[int, ...]] = {}
        for chunk in self.request_states.update(scheduler_output):
            req_id = chunk.state.req_id
            if not chunk.samples:
                sampled[req_id] = []
                continue
            base = chunk.state.num_output_tokens
            num_accepted = self._verify(req_id, base, spec.get(req_id, ()), drafter)
            tokens = [self._tape_token(req_id, base + i) for i in range(num_accepted + 1)]
            for token_id in tokens:
                self.request_states.append_sampled(req_id, token_id)
            sampled[req_id] = tokens
            next_base = base + len(tokens)
            proposals[req_id] = drafter.propose(req_id, self.tapes.get(req_id, ()), next_base)
            self._latest_drafts[req_id] = (next_base, proposals[req_id])
        req_ids = tuple(scheduler_output.num_scheduled_tokens)
        self._draft_token_ids = DraftTokenIds(
            req_ids, tuple(proposals.get(req_id, ()) for req_id in req_ids)
        )
        return ModelRunnerOutput.from_sampled(sampled)

    def _verify(self, req_id: str, base: int, drafts: Sequence[int], drafter: TapeDrafter) -> int:
        """Accepted drafts; -1 placeholders stand for the runner's own drafts from `base`."""
        if not drafts:
            return 0
        if all(token == -1 for token in drafts):
            latest = self._latest_drafts.get(req_id)
            if latest is not None and latest[0] == base and latest[1]:
                drafts = latest[1][: len(drafts)]
        return drafter.verify(req_id, self.tapes.get(req_id, ()), base, drafts)

    def _forget_drafts_of_reset_requests(self, scheduler_output: SchedulerOutput) -> None:
        """A new or resumed request starts over from the scheduler's tokens: no drafts."""
        latest = self._latest_drafts
        for new in scheduler_output.scheduled_new_reqs:
            latest.pop(new.req_id, None)
        for req_id in scheduler_output.scheduled_cached_reqs.resumed_req_ids:
            latest.pop(req_id, None)
        for req_id in scheduler_output.finished_req_ids:
            latest.pop(req_id, None)
