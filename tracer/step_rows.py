"""One step's rows for the hot tables, built in bulk.

`_scheduled` gets a row per scheduled request per step, so its rows are appended
column-wise straight from the SchedulerOutput and ModelRunnerOutput with C-level
iteration. A plain running-pass grant needs no row of its own: it is its
`_scheduled` row. Only rarer decisions (refused calls, admissions, refunded
grants, preemptions) are walked one by one into `_allocations`.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, compress, islice, repeat
from operator import add
from typing import Any

from stepscope.engine import EngineStep
from stepscope.engine.probe import (
    AdmissionCall,
    Decision,
    Preemption,
    RefusedRunningCall,
    WaitingSkip,
)
from stepscope.engine.request import RunningGrant
from stepscope.engine.scheduled_requests import scheduled_requests

from .columns import Column, OptionalIntColumn, SeqColumn, TableBuffer
from .group_block_rows import GroupTableLengths
from .redact import Redactor


class Seq:
    """Numbers a step's events, allocation calls and preemptions in order."""

    def __init__(self) -> None:
        self.value = 0

    def next(self) -> int:
        self.value += 1
        return self.value - 1

    def take(self, count: int) -> int:
        """Reserve `count` consecutive numbers; returns the first."""
        self.value += count
        return self.value - count


@dataclass(frozen=True)
class StepDecisions:
    """The seq of every scheduled row, and the decisions that need rows of their own.

    The running rows' seqs are the range `first_running_seq` + 0..num_running-1 when
    nothing interrupted the running pass; `other_seqs` holds the rest, in row order.
    """

    first_running_seq: int | None
    num_running: int
    other_seqs: list[int]
    explicit_calls: list[tuple[int, Decision]]
    preemptions: list[tuple[int, Preemption]]
    skips: list[tuple[int, WaitingSkip]]

    def add_to(self, column: Column) -> None:
        assert isinstance(column, SeqColumn)
        if self.first_running_seq is not None:
            column.extend_range(self.first_running_seq, self.first_running_seq + self.num_running)
        column.extend(self.other_seqs)


def number_decisions(engine_step: EngineStep, decisions: list[Decision], seq: Seq) -> StepDecisions:
    """Give every allocation call and preemption its seq, in call order.

    Without a preemption there was no refused running call either, so the running
    pass is exactly the output's running rows, in order, followed by admission calls.
    Such a step's running grants are listed first (stepscope's engine) or left out (a
    vLLM recording, whose engine thread does not spend a record on each).
    """
    output = engine_step.scheduler_output
    cached = output.scheduled_cached_reqs
    num_running = len(cached.req_ids) - len(cached.resumed_req_ids)
    if not output.preempted_req_ids:
        first = seq.take(num_running)
        admissions: list[tuple[int, Decision]] = []
        skips: list[tuple[int, WaitingSkip]] = []
        listed = bool(decisions) and type(decisions[0]) is RunningGrant
        for decision in decisions[num_running:] if listed else decisions:
            if type(decision) is WaitingSkip:
                skips.append((seq.next(), decision))
            else:
                admissions.append((seq.next(), decision))
        granted = [number for number, call in admissions if _granted(call)]
        return StepDecisions(first, num_running, granted, admissions, [], skips)
    return _number_walked(engine_step, decisions, seq)


def _number_walked(engine_step: EngineStep, decisions: list[Decision], seq: Seq) -> StepDecisions:
    """Walk a step with preemptions: grants that survived map to their output rows."""
    kept = set(engine_step.scheduler_output.num_scheduled_tokens)
    grant_seq: dict[str, int] = {}
    explicit: list[tuple[int, Decision]] = []
    preemptions: list[tuple[int, Preemption]] = []
    skips: list[tuple[int, WaitingSkip]] = []
    refunded = {d.request_id for d in decisions if type(d) is Preemption and d.num_tokens_refunded}
    for decision in decisions:
        number = seq.next()
        if type(decision) is Preemption:
            preemptions.append((number, decision))
        elif type(decision) is WaitingSkip:
            skips.append((number, decision))
        elif (
            type(decision) is RunningGrant
            and decision.request_id in kept
            and decision.request_id not in refunded
        ):
            grant_seq[decision.request_id] = number
        else:
            explicit.append((number, decision))
            if type(decision) is AdmissionCall and decision.refusal is None:
                grant_seq[decision.request_id] = number
    request_ids = engine_step.scheduler_output.num_scheduled_tokens
    seqs = [grant_seq[req_id] for req_id in request_ids]
    return StepDecisions(None, 0, seqs, explicit, preemptions, skips)


def _granted(decision: Decision) -> bool:
    assert isinstance(decision, AdmissionCall), decision
    return decision.refusal is None


class IndexCache:
    """The request indices of the last step's rows: a steady batch repeats them step after step."""

    def __init__(self) -> None:
        self._request_ids: Sequence[str] = ()
        self.as_list: list[int] = []
        self.as_array: array[int] = array("i")

    def update(self, request_ids: Sequence[str], request_index: Mapping[str, int]) -> None:
        """Look up `request_ids`' indices unless they are the last step's."""
        if request_ids != self._request_ids:
            self._request_ids = request_ids
            self.as_list = list(map(request_index.__getitem__, request_ids))
            self.as_array = array("i", self.as_list)


def add_scheduled(
    scheduled: TableBuffer,
    block_ids: TableBuffer,
    step: int,
    engine_step: EngineStep,
    seqs: StepDecisions,
    request_index: Mapping[str, int],
    redactor: Redactor | None,
    table_lengths: dict[int, int],
    index_cache: IndexCache,
    group_lengths: GroupTableLengths,
) -> None:
    """The output's rows in `num_scheduled_tokens` order."""
    requests = scheduled_requests(engine_step.scheduler_output)
    request_ids, num_running = requests.req_ids, requests.num_running
    index_cache.update(request_ids, request_index)
    num_rows = len(request_ids)
    columns = scheduled.columns
    columns["step"].extend_repeated(step, num_rows)
    seqs.add_to(columns["seq"])
    columns["request_index"].extend(index_cache.as_array)
    columns["kind"].extend_repeated("running", num_running)
    columns["kind"].extend(requests.kinds[num_running:])
    if engine_step.scheduler_output.total_num_scheduled_tokens == num_rows:
        # Every scheduled row has at least one token, so each has exactly one.
        columns["num_tokens"].extend_repeated(1, num_rows)
    else:
        columns["num_tokens"].extend(requests.num_scheduled_tokens)
    columns["computed_before"].extend(requests.num_computed_tokens)
    _add_sampled(columns["sampled_token_id"], engine_step, request_ids, redactor)
    tables = requests.new_block_ids
    _add_block_ids(block_ids, step, index_cache.as_list, tables, num_running, table_lengths)
    by_group = engine_step.scheduler_output.new_block_ids_by_group
    if by_group:
        group_lengths.add_rows(
            block_ids, step, request_ids, index_cache.as_list, by_group, num_running
        )


def _add_sampled(
    column: Any, engine_step: EngineStep, request_ids: Sequence[str], redactor: Redactor | None
) -> None:
    """The first token each row sampled (drafts accepted add more: `_spec_decode` has them)."""
    runner_output = engine_step.model_runner_output
    sampled = runner_output.sampled_token_ids
    if runner_output.req_ids != request_ids:
        index_of = runner_output.req_id_to_index
        sampled = [sampled[index_of[req_id]] for req_id in request_ids]
    missing = OptionalIntColumn.MISSING
    if redactor is None:
        try:
            firsts = [tokens[0] for tokens in sampled]
        except IndexError:  # a prefill chunk sampled nothing: take the slow path
            pass
        else:
            # Without drafts scheduled no row samples more than one token.
            drafts = engine_step.scheduler_output.scheduled_spec_decode_tokens
            if not drafts or sum(map(len, sampled)) == len(firsts):
                column.extend(firsts)
                return
    for tokens in sampled:
        token = tokens[0] if tokens else missing
        column.append(redactor.token(token) if redactor is not None and tokens else token)


def _add_block_ids(
    buffer: TableBuffer,
    step: int,
    indices: list[int],
    tables: Sequence[Sequence[int] | None],
    num_running: int,
    table_lengths: dict[int, int],
) -> None:
    """A row per block id in the output (most rows carry none), with its slot in the table.

    Admissions carry their whole table (slots from 0); a running request's new blocks
    continue its table, whose length `table_lengths` keeps per request.
    """
    blocks: list[Sequence[int]] = list(filter(None, tables))
    if not blocks:
        return
    if num_running == len(tables):
        continued = rows = list(compress(indices, tables))
    else:
        continued = list(compress(indices, islice(tables, num_running)))
        rows = continued + list(compress(indices[num_running:], tables[num_running:]))
    counts = list(map(len, blocks))
    firsts = list(map(table_lengths.get, continued, repeat(0)))
    firsts += repeat(0, len(rows) - len(continued))
    lengths = list(map(add, firsts, counts))
    table_lengths.update(zip(rows, lengths, strict=True))
    columns = buffer.columns
    num_blocks = sum(counts)
    columns["step"].extend_repeated(step, num_blocks)
    if num_blocks == len(rows):
        # One new block per row, as in a decode step: its slot is the table's old length.
        columns["request_index"].extend(rows)
        columns["slot"].extend(firsts)
    else:
        columns["request_index"].extend(list(chain.from_iterable(map(repeat, rows, counts))))
        columns["slot"].extend(list(chain.from_iterable(map(range, firsts, lengths))))
    columns["block_id"].extend(list(chain.from_iterable(blocks)))
    columns["kv_cache_group"].extend_repeated(0, num_blocks)


def add_explicit_calls(
    buffer: TableBuffer,
    step: int,
    calls: list[tuple[int, Decision]],
    refunds: Mapping[str, Preemption],
    request_index: Mapping[str, int],
    num_lookahead_tokens: int = 0,
) -> None:
    """Rows for refused running calls, admission calls and grants refunded later.

    Every call of the step asked for the same lookahead slots (the drafter's).
    """
    for number, call in calls:
        if type(call) is AdmissionCall:
            index, row = request_index[call.request_id], _admission_call_columns(call)
        elif type(call) is RefusedRunningCall:
            index, row = request_index[call.request_id], _refused_call_columns(call)
        else:
            assert type(call) is RunningGrant, call
            index = request_index[call.request_id]
            row = _refunded_grant_columns(refunds[call.request_id])
        row["num_lookahead_tokens"] = num_lookahead_tokens
        buffer.append_row({"step": step, "seq": number, "request_index": index, **row})


_CALL_DEFAULTS: dict[str, Any] = {
    "num_new_computed_tokens": 0,
    "num_lookahead_tokens": 0,
    "full_sequence_check": False,
    "watermark_blocks": 0,
    "num_free_blocks_before": None,
    "num_free_blocks_after": None,
    "refusal": None,
}
"""`_allocations` columns a call leaves at their default: no prefix hit, no lookahead, granted."""


def _refunded_grant_columns(refund: Preemption) -> dict[str, Any]:
    """Free-block counts are left NULL: the reader derives them as for every running grant."""
    return {
        **_CALL_DEFAULTS,
        "pass": "running",
        "num_new_tokens": refund.num_tokens_refunded,
        "num_blocks_needed": len(refund.refunded_block_ids),
        "granted": True,
        "block_ids": list(refund.refunded_block_ids),
    }


def _refused_call_columns(call: RefusedRunningCall) -> dict[str, Any]:
    refusal = call.refusal
    return {
        **_CALL_DEFAULTS,
        "pass": "running",
        "num_new_tokens": call.num_new_tokens,
        "num_blocks_needed": refusal.num_blocks_needed,
        "watermark_blocks": refusal.watermark_blocks,
        "num_free_blocks_before": refusal.num_free_blocks,
        "num_free_blocks_after": refusal.num_free_blocks,
        "granted": False,
        "refusal": refusal.check.value,
        "block_ids": [],
    }


def _admission_call_columns(call: AdmissionCall) -> dict[str, Any]:
    refusal = call.refusal
    needed = (
        refusal.num_blocks_needed
        if refusal is not None
        else call.num_free_blocks_before - call.num_free_blocks_after
    )
    return {
        "pass": "waiting",
        "num_new_tokens": call.num_new_tokens,
        "num_new_computed_tokens": call.num_new_computed_tokens,
        "num_lookahead_tokens": 0,
        "full_sequence_check": call.full_sequence_check,
        "num_blocks_needed": needed,
        "watermark_blocks": call.watermark_blocks,
        "num_free_blocks_before": call.num_free_blocks_before,
        "num_free_blocks_after": call.num_free_blocks_after,
        "granted": refusal is None,
        "refusal": None if refusal is None else refusal.check.value,
        "block_ids": list(call.block_ids),
    }
