"""A `SchedulerOutput`'s requests row by row: kind, tokens, computed tokens, new block ids.

vLLM's output splits them into new and cached (running, then resumed) request
data; the model runner, the recorder and every reader of a step want them in
`num_scheduled_tokens` order instead. Running requests come first there, in the
cached data's order, then the admissions (new or resumed) in the order admitted.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter

from .outputs import ModelRunnerOutput
from .scheduler_output import SchedulerOutput


class RequestKind(enum.StrEnum):
    """How a request came to be scheduled this step (the trace's `request_kind`)."""

    NEW = "new"
    """Admitted for the first time."""
    RESUMED = "resumed"
    """Admitted again after a preemption."""
    RUNNING = "running"
    """Scheduled again in the running pass."""


@dataclass(frozen=True, slots=True)
class ScheduledRequests:
    """One step's scheduled requests, column-wise, in `num_scheduled_tokens` order."""

    req_ids: Sequence[str]
    num_scheduled_tokens: Sequence[int]
    kinds: Sequence[RequestKind]
    num_computed_tokens: Sequence[int]
    """Computed tokens before this step (an admission's prefix-cache hit)."""
    new_block_ids: Sequence[Sequence[int] | None]
    """Blocks in the output (None or empty when none): a running request's new blocks,
    an admission's whole block table."""
    num_running: int
    """The first `num_running` rows are the running pass's."""


def scheduled_requests(output: SchedulerOutput) -> ScheduledRequests:
    """The output's requests row by row (no copies of a running-only batch's columns)."""
    cached = output.scheduled_cached_reqs
    req_ids = list(output.num_scheduled_tokens)
    num_running = len(cached.req_ids) - len(cached.resumed_req_ids)
    kinds = [RequestKind.RUNNING] * num_running
    computed: Sequence[int] = cached.num_computed_tokens[:num_running]
    tables: Sequence[Sequence[int] | None] = cached.new_block_ids[:num_running]
    if num_running < len(req_ids):
        computed, tables = list(computed), list(tables)
        _add_admissions(output, req_ids[num_running:], kinds, computed, tables)
    return ScheduledRequests(
        req_ids=req_ids,
        num_scheduled_tokens=list(output.num_scheduled_tokens.values()),
        kinds=kinds,
        num_computed_tokens=computed,
        new_block_ids=tables,
        num_running=num_running,
    )


def _add_admissions(
    output: SchedulerOutput,
    admitted: list[str],
    kinds: list[RequestKind],
    computed: list[int],
    tables: list[Sequence[int] | None],
) -> None:
    """Append the admissions' columns, new requests from their data, resumed from the cache."""
    cached = output.scheduled_cached_reqs
    new = {data.req_id: data for data in output.scheduled_new_reqs}
    num_running = len(kinds)
    resumed_at = {
        req_id: index
        for index, req_id in enumerate(islice(cached.req_ids, num_running, None), num_running)
    }
    for req_id in admitted:
        data = new.get(req_id)
        if data is not None:
            kinds.append(RequestKind.NEW)
            computed.append(data.num_computed_tokens)
            tables.append(data.block_ids)
        else:
            index = resumed_at[req_id]
            kinds.append(RequestKind.RESUMED)
            computed.append(cached.num_computed_tokens[index])
            tables.append(cached.new_block_ids[index])


def sampled_token_ids(runner_output: ModelRunnerOutput, req_ids: Sequence[str]) -> list[int | None]:
    """The first token sampled for each of `req_ids` (None: a prefill chunk that sampled none).

    A step that verified drafts samples the accepted ones too, after that first token.
    """
    sampled = runner_output.sampled_token_ids
    if runner_output.req_ids != req_ids:
        index_of = runner_output.req_id_to_index
        sampled = [sampled[index_of[req_id]] for req_id in req_ids]
    if sum(map(len, sampled)) == len(sampled) and all(sampled):
        return list(map(itemgetter(0), sampled))
    return [tokens[0] if tokens else None for tokens in sampled]
