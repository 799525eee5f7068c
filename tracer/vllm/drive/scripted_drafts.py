"""The scripted model with speculative decoding, for vLLM's scheduler: the tape model's drafter.

Drafts and verification are the engine's `TapeDrafter` (the oracle's fake drafter and
greedy rejection against the tape, or a recording's verdicts in a replay); this runner
adds what vLLM's side needs: the tape index read from vLLM's request, and, under async
scheduling, the worker's own drafts in place of the -1 placeholders the scheduler
ships, as vLLM's GPU worker verifies the drafts it proposed after the request's last
sampling step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stepscope.engine.outputs import DraftTokenIds
from stepscope.engine.tape_drafter import TapeDrafter

from .scripted_model import PAD_TOKEN_ID, VllmTapeRunner


class VllmDraftingTapeRunner(VllmTapeRunner):
    """The tape model that verifies scheduled drafts and proposes the next ones."""

    def __init__(
        self,
        scheduler: Any,
        tapes: Mapping[str, Sequence[int]],
        drafter: TapeDrafter,
        *,
        async_scheduling: bool,
    ) -> None:
        super().__init__(scheduler, tapes)
        self.drafter = drafter
        self.async_scheduling = async_scheduling
        self.produced: dict[str, int] = {}
        """Async: the tape index each request's worker has reached."""
        self.worker_drafts: dict[str, tuple[int, tuple[int, ...]]] = {}
        """Async: the drafts each worker proposed, and the tape index they start at."""
        self._proposals: dict[str, tuple[int, ...]] = {}
        self._req_ids: tuple[str, ...] = ()

    def execute_model(self, scheduler_output: Any) -> Any:
        from vllm.v1.outputs import ModelRunnerOutput

        req_ids = list(scheduler_output.num_scheduled_tokens)
        resumed = set(scheduler_output.scheduled_cached_reqs.resumed_req_ids or ())
        self._proposals = {}
        self._req_ids = tuple(req_ids)
        sampled = [
            self._verify(req_id, scheduler_output, resumed=req_id in resumed) for req_id in req_ids
        ]
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={req_id: i for i, req_id in enumerate(req_ids)},
            sampled_token_ids=sampled,
        )

    def take_draft_token_ids(self) -> DraftTokenIds | None:
        """The drafts proposed in the last step, for `post_step` (sync scheduling)."""
        if self.async_scheduling:
            return None
        drafts = tuple(self._proposals.get(req_id, ()) for req_id in self._req_ids)
        return DraftTokenIds(self._req_ids, drafts)

    def _verify(self, req_id: str, scheduler_output: Any, *, resumed: bool) -> list[int]:
        request = self.scheduler.requests[req_id]
        base = self._base(req_id, request, resumed=resumed)
        if base is None:
            return []
        tape = self.tapes.get(req_id, ())
        drafts = tuple(scheduler_output.scheduled_spec_decode_tokens.get(req_id) or ())
        if drafts and self.async_scheduling:
            drafts = self._worker_drafts(req_id, base, len(drafts))
        accepted = self.drafter.verify(req_id, tape, base, drafts) if drafts else 0
        out = [self._sample_at(req_id, base + i) for i in range(accepted + 1)]
        proposal = self.drafter.propose(req_id, tape, base + len(out))
        self._proposals[req_id] = proposal
        if self.async_scheduling:
            self.produced[req_id] = base + len(out)
            self.worker_drafts[req_id] = (base + len(out), proposal)
        return out

    def _worker_drafts(self, req_id: str, base: int, num_scheduled: int) -> tuple[int, ...]:
        """Async: the drafts the worker proposed at `base`, else the scheduler's placeholders
        (also where the proposal is unknown: an async recording holds none, only verdicts)."""
        worker = self.worker_drafts.get(req_id)
        if worker is None or worker[0] != base or not worker[1]:
            return (-1,) * num_scheduled
        return worker[1][:num_scheduled]

    def _base(self, req_id: str, request: Any, *, resumed: bool) -> int | None:
        """The tape index this step samples at, or None when it samples nothing."""
        if not self.async_scheduling:
            sampling = request.num_computed_tokens >= request.num_tokens
            return int(request.num_output_tokens) if sampling else None
        if req_id not in self.produced or resumed:
            self.produced[req_id] = int(request.num_output_tokens)
            self.worker_drafts.pop(req_id, None)
        return None if request.is_prefill_chunk else self.produced[req_id]

    def _sample_at(self, req_id: str, index: int) -> int:
        tape = self.tapes.get(req_id, ())
        if index < len(tape):
            return int(tape[index])
        self.num_padded_tokens += 1
        return PAD_TOKEN_ID
