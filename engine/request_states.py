"""The model runner's own view of each request, kept up to date from `SchedulerOutput`s.

Like vLLM's worker, a runner never reads the scheduler's `Request` objects: it
learns prompts and block tables from the output and appends what it samples.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .sampling_params import SamplingParams
from .scheduler_output import SchedulerOutput
from .workload import RequestSpec


@dataclass(slots=True)
class CachedRequestState:
    req_id: str
    token_ids: list[int]
    num_prompt_tokens: int
    block_ids: list[int]
    sampling_params: SamplingParams

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens


@dataclass(frozen=True, slots=True)
class ScheduledChunk:
    """Tokens `[start, start + num_tokens)` of one request run in this step."""

    state: CachedRequestState
    start: int
    num_tokens: int

    @property
    def end(self) -> int:
        return self.start + self.num_tokens

    @property
    def samples(self) -> bool:
        """Whether the chunk reaches the end of the known tokens, so a token is sampled."""
        return self.end >= len(self.state.token_ids)


class RequestStates:
    """Per-request token lists and block tables on the runner's side."""

    def __init__(self) -> None:
        self.states: dict[str, CachedRequestState] = {}

    def update(self, scheduler_output: SchedulerOutput) -> list[ScheduledChunk]:
        """Apply one step's output; return the scheduled chunks in output order."""
        for req_id in scheduler_output.finished_req_ids:
            self.states.pop(req_id, None)
        starts: dict[str, int] = {}
        for new in scheduler_output.scheduled_new_reqs:
            self.states[new.req_id] = CachedRequestState(
                req_id=new.req_id,
                token_ids=list(new.prompt_token_ids),
                num_prompt_tokens=len(new.prompt_token_ids),
                block_ids=list(new.block_ids),
                sampling_params=new.sampling_params,
            )
            starts[new.req_id] = new.num_computed_tokens
        for req_id, start in self._update_cached(scheduler_output):
            starts[req_id] = start
        return [
            ScheduledChunk(self.states[req_id], starts[req_id], num_tokens)
            for req_id, num_tokens in scheduler_output.num_scheduled_tokens.items()
        ]

    def _update_cached(self, scheduler_output: SchedulerOutput) -> Iterator[tuple[str, int]]:
        cached = scheduler_output.scheduled_cached_reqs
        for index, req_id in enumerate(cached.req_ids):
            state = self.states[req_id]
            new_block_ids = cached.new_block_ids[index]
            if req_id in cached.resumed_req_ids:
                state.block_ids = list(new_block_ids or ())
            elif new_block_ids is not None:
                state.block_ids.extend(new_block_ids)
            if req_id in cached.all_token_ids:
                state.token_ids = list(cached.all_token_ids[req_id])
            yield req_id, cached.num_computed_tokens[index]

    def resume(
        self,
        spec: RequestSpec,
        token_ids: Sequence[int],
        block_ids: Sequence[int],
    ) -> None:
        """The state a runner holds for a request it has run, at a checkpoint: its prompt
        and `token_ids` after it, its block table."""
        self.states[spec.request_id] = CachedRequestState(
            req_id=spec.request_id,
            token_ids=[*spec.prompt_token_ids, *token_ids],
            num_prompt_tokens=len(spec.prompt_token_ids),
            block_ids=list(block_ids),
            sampling_params=spec.sampling_params,
        )

    def append_sampled(self, req_id: str, token_id: int) -> None:
        self.states[req_id].token_ids.append(token_id)
