"""One step's decision, from a trace or a live engine step, for the TUI's live replay.

A step's decision is what the scheduler chose: which requests ran and in what order,
how many tokens each and how each came to run (new, resumed, running), which were
preempted, the block ids handed out, the free blocks left, and the step whose update
processed the output; plus what the model sampled for each row, an input. Only the
TUI's live replay still compares decisions this way, a step at a time beside the
engine; exact replay, `stepscope diff` and the TUI's diff read `step_differences`,
whose field names these are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress

from stepscope.engine import StepRecord
from stepscope.engine.scheduled_requests import (
    RequestKind,
    sampled_token_ids,
    scheduled_requests,
)
from stepscope.schema import Trace
from stepscope.schema.ddl import enum_types

from .recorded_steps import LAST_STEP, SAMPLED_NONE, RecordedStep, RecordedSteps
from .sql import query
from .step_differences import MISSING_STEP

_KINDS = tuple(RequestKind(name) for name in enum_types()["request_kind"])
"""The `request_kind` enum's values by code."""


@dataclass(frozen=True, slots=True)
class StepDecision:
    """What the scheduler decided at one step (its columns are lists on every side, so a
    recorded and a replayed decision compare equal when they agree)."""

    step: int
    idle: bool
    req_ids: Sequence[str] = ()
    """Scheduled requests in `num_scheduled_tokens` order."""
    num_scheduled_tokens: Sequence[int] = ()
    kinds: Sequence[RequestKind] = ()
    sampled_token_ids: Sequence[int | None] = ()
    """The token each row sampled (None: a prefill chunk that sampled none)."""
    preempted_req_ids: frozenset[str] = frozenset()
    num_free_blocks: int | None = None
    """Free KV blocks after `schedule()`."""
    block_ids: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Block ids in the output per request (those that got none are left out): a running
    request's new blocks, an admission's whole table."""
    update_step: int | None = None
    """The step whose update processed this step's output (the next one, async)."""

    @property
    def scheduled(self) -> list[tuple[str, int, RequestKind]]:
        """(request id, tokens, kind) per scheduled request, in order."""
        return list(zip(self.req_ids, self.num_scheduled_tokens, self.kinds, strict=True))


def differences(
    a: StepDecision | None, b: StepDecision | None, *, ignore_block_ids: bool = False
) -> tuple[str, ...]:
    """The names (`step_differences.DECISION_FIELDS`) of the parts of a step's decision
    that differ."""
    if a is None or b is None:
        return () if a is b else (MISSING_STEP,)
    found = []
    if a.idle != b.idle:
        found.append("idle")
    if a.update_step != b.update_step:
        found.append("update_step")
    if a.num_free_blocks != b.num_free_blocks:
        found.append("num_free_blocks")
    if (
        a.req_ids != b.req_ids
        or a.num_scheduled_tokens != b.num_scheduled_tokens
        or a.kinds != b.kinds
    ):
        found.append("scheduled")
    if a.preempted_req_ids != b.preempted_req_ids:
        found.append("preempted")
    if not ignore_block_ids and a.block_ids != b.block_ids:
        found.append("block_ids")
    return tuple(found)


def live_decision(record: StepRecord) -> StepDecision:
    """The decision of a step the engine just took."""
    engine_step = record.engine_step
    if engine_step is None:
        return StepDecision(record.step, idle=True)
    output = engine_step.scheduler_output
    requests = scheduled_requests(output)
    req_ids = requests.req_ids
    return StepDecision(
        step=record.step,
        idle=False,
        req_ids=req_ids,
        num_scheduled_tokens=requests.num_scheduled_tokens,
        kinds=requests.kinds,
        sampled_token_ids=sampled_token_ids(engine_step.model_runner_output, req_ids),
        preempted_req_ids=output.preempted_req_ids,
        num_free_blocks=engine_step.num_free_blocks_after_schedule,
        block_ids=new_blocks(req_ids, requests.new_block_ids),
        update_step=record.update_step,
    )


def new_blocks(
    req_ids: Sequence[str], tables: Sequence[Sequence[int] | None]
) -> dict[str, tuple[int, ...]]:
    """The block ids per request of the rows that got any (most rows get none)."""
    return {req_ids[i]: tuple(tables[i] or ()) for i in compress(range(len(tables)), tables)}


class RecordedDecisions:
    """A trace's step decisions in step order, read a range at a time (never all at once)."""

    def __init__(self, trace: Trace, batch_rows: int = 1 << 16) -> None:
        self.trace = trace
        self.steps = RecordedSteps(trace, batch_rows)
        self._request_ids: dict[int, str] | None = None

    def __iter__(self) -> Iterator[StepDecision]:
        return self.between(0, LAST_STEP)

    def between(self, first: int, last: int) -> Iterator[StepDecision]:
        """The decisions of steps `first`..`last`."""
        ids = self.request_ids
        return (recorded_decision(step, ids) for step in self.steps.between(first, last))

    @property
    def request_ids(self) -> dict[int, str]:
        """Each request's id by its index, read once."""
        if self._request_ids is None:
            rows = self.trace.sql(query("request_ids")).fetchall()
            self._request_ids = dict(rows)
        return self._request_ids


def recorded_decision(recorded: RecordedStep, ids: Mapping[int, str]) -> StepDecision:
    """A recorded step's decision, its rows made Python values (lists, as a live one's)."""
    if recorded.idle:
        return StepDecision(recorded.step, idle=True)
    sampled = memoryview(recorded.sampled).cast("q").tolist()
    return StepDecision(
        step=recorded.step,
        idle=False,
        req_ids=[ids[index] for index in memoryview(recorded.request_indices).cast("i")],
        num_scheduled_tokens=memoryview(recorded.num_tokens).cast("i").tolist(),
        kinds=[_KINDS[code] for code in recorded.kinds],
        sampled_token_ids=[None if token == SAMPLED_NONE else token for token in sampled],
        preempted_req_ids=frozenset(ids[index] for index in recorded.preempted),
        num_free_blocks=recorded.num_free_blocks,
        block_ids=block_map(recorded_block_rows(recorded), ids),
        update_step=recorded.update_step,
    )


def recorded_block_rows(recorded: RecordedStep) -> Iterator[tuple[int, int]]:
    """A recorded step's (request index, block id) rows, by request then slot."""
    requests = memoryview(recorded.block_requests).cast("i")
    return zip(requests, memoryview(recorded.block_ids).cast("i"), strict=True)


def block_map(
    rows: Iterable[tuple[int, int]], ids: Mapping[int, str]
) -> dict[str, tuple[int, ...]]:
    """(request index, block id) rows as each request's block ids, in row order."""
    table: dict[str, list[int]] = {}
    for index, block_id in rows:
        table.setdefault(ids[index], []).append(block_id)
    return {req_id: tuple(block_ids) for req_id, block_ids in table.items()}
