"""The scripted model with speculative decoding: the oracle's fake drafter and verifier.

Drafts for output positions `base … base+k-1` are the request's tape, except that from
the first position its script says is mispredicted (`draft_accept`, else
`draft_mismatch_every`) every draft is a wrong token (tape + 1). Verification is greedy
rejection against the tape: the longest matching prefix of the scheduled drafts is
accepted, then one bonus token. Under async scheduling the scheduler ships -1
placeholders and the worker verifies the drafts it proposed after the request's last
sampling step, as vLLM's GPU worker does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from stepscope.engine.outputs import DraftTokenIds
from stepscope.engine.workload import RequestSpec

from .scripted_core import PAD_TOKEN_ID, VllmTapeRunner

DRAFT_VOCAB_SIZE = 32000
"""The scripted model's vocabulary (the tiny config's): a wrong draft wraps within it."""


class VllmDraftingTapeRunner(VllmTapeRunner):
    """The tape model that verifies scheduled drafts and proposes the next ones."""

    def __init__(
        self,
        scheduler: Any,
        specs: Sequence[RequestSpec],
        num_speculative_tokens: int,
        async_scheduling: bool,
    ) -> None:
        super().__init__(scheduler, {spec.request_id: spec.output_token_ids for spec in specs})
        self.specs: Mapping[str, RequestSpec] = {spec.request_id: spec for spec in specs}
        self.num_spec = num_speculative_tokens
        self.async_scheduling = async_scheduling
        self.produced: dict[str, int] = {}
        """Async: the tape index each request's worker has reached."""
        self.worker_drafts: dict[str, tuple[int, list[int]]] = {}
        """Async: the drafts each worker proposed, and the tape index they start at."""
        self.num_verifications: dict[str, int] = {}
        """Verifications of real drafts so far per request (indexes `draft_accept`)."""
        self._proposals: dict[str, list[int]] = {}
        self._req_ids: list[str] = []

    def execute_model(self, scheduler_output: Any) -> Any:
        from vllm.v1.outputs import ModelRunnerOutput

        req_ids = list(scheduler_output.num_scheduled_tokens)
        resumed = set(scheduler_output.scheduled_cached_reqs.resumed_req_ids or ())
        self._proposals = {}
        self._req_ids = req_ids
        sampled = [self._verify(req_id, scheduler_output, req_id in resumed) for req_id in req_ids]
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={req_id: i for i, req_id in enumerate(req_ids)},
            sampled_token_ids=sampled,
        )

    def take_draft_token_ids(self) -> DraftTokenIds | None:
        """The drafts proposed in the last step, for `post_step` (sync scheduling)."""
        if self.async_scheduling:
            return None
        req_ids = tuple(self._req_ids)
        drafts = tuple(tuple(self._proposals.get(req_id, ())) for req_id in req_ids)
        return DraftTokenIds(req_ids, drafts)

    def _verify(self, req_id: str, scheduler_output: Any, resumed: bool) -> list[int]:
        request = self.scheduler.requests[req_id]
        base = self._base(req_id, request, resumed)
        if base is None:
            return []
        drafts = list(scheduler_output.scheduled_spec_decode_tokens.get(req_id) or ())
        if drafts and self.async_scheduling:
            worker = self.worker_drafts.get(req_id)
            held = worker is not None and worker[0] == base
            drafts = list(worker[1][: len(drafts)]) if held and worker else [-1] * len(drafts)
        if any(token != -1 for token in drafts):
            self.num_verifications[req_id] = self.num_verifications.get(req_id, 0) + 1
        accepted = self._accepted(req_id, drafts, base)
        out = [self._sample_at(req_id, base + i) for i in range(accepted + 1)]
        proposal = self._propose(req_id, base + len(out))
        self._proposals[req_id] = proposal
        if self.async_scheduling:
            self.produced[req_id] = base + len(out)
            self.worker_drafts[req_id] = (base + len(out), proposal)
        return out

    def _accepted(self, req_id: str, drafts: Sequence[int], base: int) -> int:
        """Greedy rejection against the tape: the longest prefix of drafts that matches."""
        accepted = 0
        while accepted < len(drafts) and drafts[accepted] == self._tape(req_id, base + accepted):
            accepted += 1
        return accepted

    def _base(self, req_id: str, request: Any, resumed: bool) -> int | None:
        """The tape index this step samples at, or None when it samples nothing."""
        if not self.async_scheduling:
            sampling = request.num_computed_tokens >= request.num_tokens
            return int(request.num_output_tokens) if sampling else None
        if req_id not in self.produced or resumed:
            self.produced[req_id] = int(request.num_output_tokens)
            self.worker_drafts.pop(req_id, None)
        return None if request.is_prefill_chunk else self.produced[req_id]

    def _tape(self, req_id: str, index: int) -> int:
        tape = self.tapes.get(req_id, ())
        return int(tape[index]) if index < len(tape) else PAD_TOKEN_ID

    def _sample_at(self, req_id: str, index: int) -> int:
        self.num_padded_tokens += index >= len(self.tapes.get(req_id, ()))
        return self._tape(req_id, index)

    def _propose(self, req_id: str, base: int) -> list[int]:
        spec = self.specs[req_id]
        correct = self.num_spec
        if spec.draft_accept is not None:
            verification = self.num_verifications.get(req_id, 0)
            if verification < len(spec.draft_accept):
                correct = spec.draft_accept[verification]
        elif spec.draft_mismatch_every:
            every = spec.draft_mismatch_every
            wrong = (i for i in range(self.num_spec) if (base + i + 1) % every == 0)
            correct = next(wrong, self.num_spec)
        correct = max(0, min(self.num_spec, correct))
        tape = [self._tape(req_id, base + i) for i in range(self.num_spec)]
        return [
            token if i < correct else (token + 1) % DRAFT_VOCAB_SIZE for i, token in enumerate(tape)
        ]


class Verdict(Protocol):
    """How a recording's model answered one scheduling of a request."""

    @property
    def num_accepted(self) -> int | None: ...

    @property
    def proposed(self) -> tuple[int, ...] | None: ...


class VllmRecordedDraftsRunner(VllmDraftingTapeRunner):
    """The tape model answering as a recording did: its accepted counts and its drafts.

    Each scheduling of a request takes that request's next recorded verdict, so a
    trace replays through vLLM's scheduler with the drafts its own drafter proposed.
    """

    def __init__(
        self,
        scheduler: Any,
        specs: Sequence[RequestSpec],
        num_speculative_tokens: int,
        async_scheduling: bool,
        verdicts: Mapping[str, Iterable[Verdict]],
    ) -> None:
        super().__init__(scheduler, specs, num_speculative_tokens, async_scheduling)
        self.verdicts = {req_id: deque(queue) for req_id, queue in verdicts.items()}
        self._verdicts: dict[str, Verdict | None] = {}

    def execute_model(self, scheduler_output: Any) -> Any:
        self._verdicts = {
            req_id: self._next_verdict(req_id) for req_id in scheduler_output.num_scheduled_tokens
        }
        return super().execute_model(scheduler_output)

    def take_draft_token_ids(self) -> DraftTokenIds | None:
        """None where the recording handed the scheduler no drafts after this step."""
        if all(v is None or v.proposed is None for v in self._verdicts.values()):
            return None
        return super().take_draft_token_ids()

    def _next_verdict(self, req_id: str) -> Verdict | None:
        queue = self.verdicts.get(req_id)
        return queue.popleft() if queue else None

    def _accepted(self, req_id: str, drafts: Sequence[int], base: int) -> int:
        verdict = self._verdicts.get(req_id)
        if not drafts or verdict is None or verdict.num_accepted is None:
            return 0
        return min(verdict.num_accepted, len(drafts))

    def _propose(self, req_id: str, base: int) -> list[int]:
        verdict = self._verdicts.get(req_id)
        return list(verdict.proposed or ()) if verdict is not None else []
