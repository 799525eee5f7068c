"""One step's decision in a form both a trace and a live engine step can be put in, and compared.

A step's decision is what the scheduler chose: which requests ran and in what order,
how many tokens each, which were admitted or resumed, which were preempted, the block
ids handed out and the free blocks left; plus what the model sampled for each row.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, islice
from operator import itemgetter
from typing import Any

from stepscope.engine import StepRecord
from stepscope.schema import Trace
from stepscope.schema.ddl import enum_types

DECISION_FIELDS = ("idle", "requests", "num_tokens", "kinds", "preempted", "num_free_blocks")
"""Fields that are the scheduler's choice; `block_ids` joins them unless ignored."""

KIND_NAMES = enum_types()["request_kind"]
_NEW, _RESUMED, _RUNNING = (KIND_NAMES.index(name) for name in ("new", "resumed", "running"))


@dataclass(frozen=True)
class StepDecision:
    step: int
    idle: bool
    requests: Sequence[int] = ()
    """Request indices in `num_scheduled_tokens` order."""
    num_tokens: Sequence[int] = ()
    kinds: Sequence[int] = ()
    """Codes of the `request_kind` enum (see `KIND_NAMES`)."""
    sampled: Sequence[int | None] = ()
    preempted: frozenset[int] = frozenset()
    num_free_blocks: int | None = None
    block_ids: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    """New block ids per request index (requests that got none are left out)."""

    def differences(self, other: StepDecision, ignore_block_ids: bool = False) -> list[str]:
        """Names of the decision fields that differ (`sampled` is an input, checked apart)."""
        names = [name for name in DECISION_FIELDS if getattr(self, name) != getattr(other, name)]
        if not ignore_block_ids and self.block_ids != other.block_ids:
            names.append("block_ids")
        return names


def live_decision(record: StepRecord, request_index: Mapping[str, int]) -> StepDecision:
    """The decision of a step the engine just took."""
    engine_step = record.engine_step
    if engine_step is None:
        return StepDecision(record.step, idle=True)
    output = engine_step.scheduler_output
    cached = output.scheduled_cached_reqs
    request_ids = list(output.num_scheduled_tokens)
    num_running = len(cached.req_ids) - len(cached.resumed_req_ids)
    new = {data.req_id: data for data in output.scheduled_new_reqs}
    kinds = [_RUNNING] * num_running
    tables: list[Sequence[int] | None] = list(cached.new_block_ids[:num_running])
    for req_id in islice(request_ids, num_running, None):
        data = new.get(req_id)
        kinds.append(_NEW if data is not None else _RESUMED)
        tables.append(data.block_ids if data is not None else _resumed_table(cached, req_id))
    return StepDecision(
        step=record.step,
        idle=False,
        requests=list(map(request_index.__getitem__, request_ids)),
        num_tokens=list(output.num_scheduled_tokens.values()),
        kinds=kinds,
        sampled=_sampled(engine_step, request_ids),
        preempted=frozenset(map(request_index.__getitem__, output.preempted_req_ids)),
        num_free_blocks=engine_step.num_free_blocks_after_schedule,
        block_ids={
            request_index[request_ids[i]]: tuple(tables[i] or ())
            for i in compress(range(len(tables)), tables)
        },
    )


def _resumed_table(cached: Any, req_id: str) -> Sequence[int]:
    return cached.new_block_ids[cached.req_ids.index(req_id)] or ()


def _sampled(engine_step: Any, request_ids: list[str]) -> list[int | None]:
    runner_output = engine_step.model_runner_output
    sampled = runner_output.sampled_token_ids
    if runner_output.req_ids != request_ids:
        index_of = runner_output.req_id_to_index
        sampled = [sampled[index_of[req_id]] for req_id in request_ids]
    if sum(map(len, sampled)) == len(sampled) and all(sampled):
        return list(map(itemgetter(0), sampled))
    return [_first(tokens) for tokens in sampled]


def _first(tokens: Sequence[int]) -> int | None:
    assert len(tokens) <= 1, f"{len(tokens)} tokens sampled in one step"
    return tokens[0] if tokens else None


class RecordedDecisions:
    """A trace's step decisions, read in step order a batch at a time (never all at once)."""

    def __init__(self, trace: Trace, batch_rows: int = 1 << 16) -> None:
        self.trace = trace
        self.batch_rows = batch_rows

    def __iter__(self) -> Iterator[StepDecision]:
        def stream(query: str) -> Iterator[tuple[int, dict[str, list[Any]]]]:
            return _grouped(self.trace.stream(query, self.batch_rows))

        steps = stream(
            "SELECT step, idle, num_free_blocks_after_schedule FROM _steps ORDER BY step"
        )
        scheduled = _Lookahead(
            stream(
                "SELECT step, request_index, num_tokens, enum_code(kind) AS kind, "
                "sampled_token_id FROM _scheduled ORDER BY step, seq"
            )
        )
        blocks = _Lookahead(
            stream(
                "SELECT step, request_index, block_id FROM _block_ids "
                "ORDER BY step, request_index, slot"
            )
        )
        preemptions = _Lookahead(
            stream("SELECT step, request_index FROM _preemptions ORDER BY step, seq")
        )
        for step, row in steps:
            if row["idle"][0]:
                yield StepDecision(step, idle=True)
                continue
            rows = scheduled.take(step)
            yield StepDecision(
                step=step,
                idle=False,
                requests=rows.get("request_index", []),
                num_tokens=rows.get("num_tokens", []),
                kinds=rows.get("kind", []),
                sampled=rows.get("sampled_token_id", []),
                preempted=frozenset(preemptions.take(step).get("request_index", [])),
                num_free_blocks=row["num_free_blocks_after_schedule"][0],
                block_ids=_block_map(blocks.take(step)),
            )


def _block_map(rows: Mapping[str, list[Any]]) -> dict[int, tuple[int, ...]]:
    table: dict[int, list[int]] = {}
    for index, block_id in zip(
        rows.get("request_index", []), rows.get("block_id", []), strict=True
    ):
        table.setdefault(index, []).append(block_id)
    return {index: tuple(ids) for index, ids in table.items()}


def _grouped(reader: Any) -> Iterator[tuple[int, dict[str, list[Any]]]]:
    """Runs of rows with the same `step` (the first column), as column lists."""
    pending_step: int | None = None
    pending: dict[str, list[Any]] = {}
    for batch in reader:
        columns = {
            name: column.to_pylist()
            for name, column in zip(batch.schema.names, batch.columns, strict=True)
        }
        steps = columns["step"]
        start = 0
        while start < len(steps):
            step = steps[start]
            end = _run_end(steps, start)
            if pending_step is not None and step != pending_step:
                yield pending_step, pending
                pending = {}
            pending_step = step
            for name, values in columns.items():
                pending.setdefault(name, []).extend(values[start:end])
            start = end
    if pending_step is not None:
        yield pending_step, pending


def _run_end(steps: list[int], start: int) -> int:
    """One past the last index of the run of equal values starting at `start` (sorted input)."""
    step, low, high = steps[start], start, len(steps)
    while low < high:
        middle = (low + high) // 2
        if steps[middle] <= step:
            low = middle + 1
        else:
            high = middle
    return low


class _Lookahead:
    """Hands out a grouped stream's rows for a step, or nothing if that step has none."""

    def __init__(self, groups: Iterator[tuple[int, dict[str, list[Any]]]]) -> None:
        self._groups = groups
        self._next: tuple[int, dict[str, list[Any]]] | None = next(groups, None)

    def take(self, step: int) -> dict[str, list[Any]]:
        while self._next is not None and self._next[0] < step:
            self._next = next(self._groups, None)
        if self._next is None or self._next[0] != step:
            return {}
        rows = self._next[1]
        self._next = next(self._groups, None)
        return rows
