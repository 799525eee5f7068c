"""The recording's own drafter for a replay with speculative decoding: its verdicts and drafts.

A request's tokens come from its tape (`TapeModelRunner`); what speculative
decoding adds comes from `_spec_decode`, matched by the request's n-th sampling
step: how many of the scheduled drafts the model accepted (so how many tokens the
step appends, and how far `num_computed_tokens` rolls back), and the drafts the
drafter proposed after it, which the engine core hands the scheduler as `post_step`
does. The recorded count, not a comparison with the tape, decides acceptance, so a
real drafter's drafts and an async step's placeholders verify as they did.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stepscope.engine import TapeModelRunner, Workload
from stepscope.engine.tape_drafter import TapeDrafter
from stepscope.engine.tape_runner import PAD_TOKEN_ID
from stepscope.schema import Trace

from .sql import query
from .stored_alike import ALL_STEPS


@dataclass(frozen=True, slots=True)
class RecordedVerdict:
    """One sampling step of a request, as the recording's model answered it."""

    num_accepted: int | None
    proposed: tuple[int, ...] | None


def recorded_verdicts(trace: Trace, first_step: int = 0) -> dict[str, list[RecordedVerdict]]:
    """Each request's verdicts from `first_step` on, in the order it sampled
    (`sql/recorded_drafts.sql`)."""
    verdicts: dict[str, list[RecordedVerdict]] = defaultdict(list)
    rows = trace.sql(query("recorded_drafts"), [first_step, ALL_STEPS]).fetchall()
    for request_id, accepted, proposed in rows:
        drafts = None if proposed is None else tuple(proposed)
        verdicts[request_id].append(RecordedVerdict(accepted, drafts))
    return dict(verdicts)


class RecordedDrafter(TapeDrafter):
    """Accepts as many drafts, and proposes the drafts, that the recording says.

    The tape runner verifies (if drafts were scheduled) and then proposes once per
    sampling step, so `propose` moves on to the request's next verdict.
    """

    def __init__(
        self, num_speculative_tokens: int, verdicts: Mapping[str, Iterable[RecordedVerdict]]
    ) -> None:
        super().__init__(num_speculative_tokens, {}, PAD_TOKEN_ID)
        self.verdicts = {req_id: deque(queue) for req_id, queue in verdicts.items()}

    def verify(self, req_id: str, tape: Sequence[int], base: int, drafts: Sequence[int]) -> int:
        queue = self.verdicts.get(req_id)
        accepted = queue[0].num_accepted if queue else None
        return min(accepted or 0, len(drafts))

    def propose(self, req_id: str, tape: Sequence[int], base: int) -> tuple[int, ...]:
        queue = self.verdicts.get(req_id)
        verdict = queue.popleft() if queue else None
        return () if verdict is None or verdict.proposed is None else verdict.proposed


def recorded_drafter(
    workload: Workload, trace: Trace, first_step: int = 0
) -> RecordedDrafter | None:
    """The recording's drafter (from `first_step` on) when speculative decoding was on."""
    k = workload.config.num_speculative_tokens
    return RecordedDrafter(k, recorded_verdicts(trace, first_step)) if k else None


def replay_model_runner(workload: Workload, trace: Trace, first_step: int = 0) -> TapeModelRunner:
    """The tapes; with speculative decoding on, the recording's verdicts and drafts too
    (from `first_step` on: a run from a checkpoint there)."""
    drafter = recorded_drafter(workload, trace, first_step)
    if drafter is None:
        return TapeModelRunner.for_workload(workload)
    tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
    return TapeModelRunner(tapes, drafter)


SPEC_KNOBS = frozenset({"num_speculative_tokens", "speculative_method"})
"""Knobs that change what a drafter proposes, so a recording's verdicts no longer apply."""


def whatif_model_runner(
    workload: Workload, trace: Trace, knobs: Mapping[str, Any], first_step: int = 0
) -> TapeModelRunner:
    """The tapes, and where speculative decoding was on, its drafts and verdicts.

    A workload that scripts its drafts (the tape model's) keeps its script. Otherwise
    (a real model's recording) the recording's verdicts are the model's answers, matched
    by each request's n-th sampling step, as long as the what-if leaves the drafter alone;
    with other speculative knobs the tape drafts every token right.
    """
    scripted = any(
        spec.draft_accept is not None or spec.draft_mismatch_every is not None
        for spec in workload.requests
    )
    if scripted or SPEC_KNOBS & knobs.keys():
        return TapeModelRunner.for_workload(workload)
    return replay_model_runner(workload, trace, first_step)
