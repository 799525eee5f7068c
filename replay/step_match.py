"""Whether an engine step decided as a recorded step did, without building either decision.

The live step's rows are packed as the recorded ones are stored (`array` bytes of
request indices, tokens, kind codes, sampled tokens, and the block ids with their
requests' indices), so a step that agrees costs
a few byte comparisons. The check is at least as strict as `differences` plus
`input_differences`: a step it rejects is decoded and compared field by field.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, compress

from stepscope.engine import StepRecord
from stepscope.engine.outputs import ModelRunnerOutput
from stepscope.engine.scheduled_requests import (
    RequestKind,
    ScheduledRequests,
    sampled_token_ids,
    scheduled_requests,
)
from stepscope.schema.ddl import enum_types

from .recorded_steps import SAMPLED_NONE, RecordedStep

_KIND_CODES = {RequestKind(name): code for code, name in enumerate(enum_types()["request_kind"])}
"""Each request kind's `request_kind` enum code."""

_RUNNING_CODE = bytes([_KIND_CODES[RequestKind.RUNNING]])


class StepMatcher:
    """Checks engine steps against recorded ones, step after step.

    A column that equals the previous step's on both sides (the running batch most
    steps) matches without being packed again.
    """

    def __init__(self, ids: Mapping[int, str], index_of: Mapping[str, int]) -> None:
        self.ids, self.index_of = ids, index_of
        self._req_ids, self._num_tokens, self._kinds = _Memo(), _Memo(), _Memo()

    def same_decision(self, recorded: RecordedStep, record: StepRecord) -> bool:
        """Whether `record` decided and sampled as `recorded` (a False may still agree)."""
        engine_step = record.engine_step
        if engine_step is None or recorded.idle:
            return engine_step is None and recorded.idle
        output = engine_step.scheduler_output
        if (
            recorded.update_step != record.update_step
            or recorded.num_free_blocks != engine_step.num_free_blocks_after_schedule
            or len(recorded.kinds) != len(output.num_scheduled_tokens)
        ):
            return False
        requests = scheduled_requests(output)
        return (
            self._same_rows(recorded, requests)
            and _same_sampled(recorded, engine_step.model_runner_output, requests.req_ids)
            and _same_preempted(recorded.preempted, output.preempted_req_ids, self.ids)
            and self._same_blocks(recorded, requests)
        )

    def _same_rows(self, recorded: RecordedStep, requests: ScheduledRequests) -> bool:
        """The same requests in the same order, with the same tokens and kinds."""
        index_of = self.index_of
        return (
            self._req_ids.same(
                requests.req_ids,
                recorded.request_indices,
                lambda: array("i", map(index_of.__getitem__, requests.req_ids)).tobytes(),
            )
            and self._num_tokens.same(
                requests.num_scheduled_tokens,
                recorded.num_tokens,
                lambda: array("i", requests.num_scheduled_tokens).tobytes(),
            )
            and self._kinds.same(requests.kinds, recorded.kinds, lambda: _kind_codes(requests))
        )

    def _same_blocks(self, recorded: RecordedStep, requests: ScheduledRequests) -> bool:
        """The same block ids per request: the rows that got any, packed by request index
        as the trace stores them (by request, then slot)."""
        tables = requests.new_block_ids
        if not recorded.block_ids:
            return not any(tables)
        blocks = list(filter(None, tables))
        try:
            owners = list(map(self.index_of.__getitem__, compress(requests.req_ids, tables)))
        except KeyError:  # a request the trace does not have
            return False
        block_ids: Iterable[int]
        if sum(map(len, blocks)) == len(blocks) and owners == sorted(owners):
            block_ids = chain.from_iterable(blocks)  # a block a row, rows by request: as stored
        else:
            given = sorted(zip(owners, blocks, strict=True))
            owners = [index for index, table in given for _ in table]
            block_ids = chain.from_iterable(table for _, table in given)
        return array("i", owners).tobytes() == recorded.block_requests and (
            array("i", block_ids).tobytes() == recorded.block_ids
        )


class _Memo:
    """The last live column that matched its recorded bytes: the same pair matches again."""

    def __init__(self) -> None:
        self.live: Sequence[object] | None = None
        self.recorded = b""

    def same(self, live: Sequence[object], recorded: bytes, pack: Callable[[], bytes]) -> bool:
        if recorded == self.recorded and live == self.live:
            return True
        try:
            if pack() != recorded:
                return False
        except KeyError:  # a request the trace does not have
            return False
        self.live, self.recorded = live, recorded
        return True


def _kind_codes(requests: ScheduledRequests) -> bytes:
    """The rows' kind codes: the running pass's rows are all `running`."""
    admitted = requests.kinds[requests.num_running :]
    return _RUNNING_CODE * requests.num_running + bytes(map(_KIND_CODES.__getitem__, admitted))


def _same_preempted(
    recorded: tuple[int, ...], preempted: frozenset[str], ids: Mapping[int, str]
) -> bool:
    """The same victims (most steps have none on either side)."""
    if not recorded:
        return not preempted
    return frozenset(map(ids.__getitem__, recorded)) == preempted


def _same_sampled(
    recorded: RecordedStep, runner_output: ModelRunnerOutput, req_ids: Sequence[str]
) -> bool:
    """The same token sampled by each row (or none by the same rows)."""
    rows = runner_output.sampled_token_ids
    if runner_output.req_ids == req_ids:
        try:
            tokens = [token for (token,) in rows]
        except ValueError:  # a row sampled none, or drafts after its token
            pass
        else:  # one token per row, as most steps sample
            return array("q", tokens).tobytes() == recorded.sampled
    sampled = sampled_token_ids(runner_output, req_ids)
    none = SAMPLED_NONE
    packed = array("q", [none if token is None else token for token in sampled])
    return packed.tobytes() == recorded.sampled
