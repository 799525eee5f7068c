"""A trace's step decisions with their scheduled rows and block ids kept as column bytes.

Exact replay compares every scheduled row with the engine's; making each row's values
Python objects would cost more than the engine's step, so a step's scheduled rows stay
the bytes of their Arrow columns (native integers, as `array` packs them) and only a
step that differs is decoded (`step_decision.RecordedDecisions`). Steps are read in
ranges of about `batch_rows` scheduled rows, each range's rows whole, so no step is
split between two reads; a range's rows are read in the order recorded (`row_order`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass
from itertools import chain, starmap
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from stepscope.schema import Trace

from .read_ahead import ReadAhead
from .row_order import by_step_then_seq
from .sql import query

SAMPLED_NONE = -(1 << 63)
"""The `sampled` value of a row that sampled nothing (a prefill chunk); no token id is negative."""

LAST_STEP = (1 << 31) - 1

Cursor = duckdb.DuckDBPyConnection

_SCHEDULED = (
    ("request_index", pa.int32(), -1),
    ("num_tokens", pa.int32(), -1),
    ("kind", pa.uint8(), 255),
    ("sampled_token_id", pa.int64(), SAMPLED_NONE),
)
"""The scheduled columns of `RecordedStep`'s first four bytes fields: Arrow type, NULL read as."""

_BLOCKS = (("request_index", pa.int32(), -1), ("block_id", pa.int32(), -1))
"""The block id columns of `RecordedStep.block_requests` and `block_ids`."""


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """One recorded step's decision; its scheduled rows are column bytes in output order."""

    step: int
    idle: bool
    num_free_blocks: int | None
    update_step: int | None
    request_indices: bytes = b""
    """`array('i')` bytes: each row's request index."""
    num_tokens: bytes = b""
    """`array('i')` bytes: tokens scheduled per row."""
    kinds: bytes = b""
    """One `request_kind` code per row."""
    sampled: bytes = b""
    """`array('q')` bytes: the token each row sampled, `SAMPLED_NONE` for none."""
    block_requests: bytes = b""
    """`array('i')` bytes: the request index of each of the output's block ids, by request
    then slot (one row per block id)."""
    block_ids: bytes = b""
    """`array('i')` bytes: those block ids, row for row."""
    preempted: tuple[int, ...] = ()
    """Request indices of the step's victims, in the order preempted."""


class RecordedSteps:
    """A trace's `RecordedStep`s in step order, read a range of steps at a time.

    With `ahead`, the ranges are read on a thread of their own (`ReadAhead`), from the
    moment `between` is called; close what it returns before closing the trace.
    """

    def __init__(self, trace: Trace, batch_rows: int = 1 << 16, ahead: bool = False) -> None:
        self.trace = trace
        self.batch_rows = batch_rows
        self.ahead = ahead

    def between(self, first: int, last: int) -> StepsRead:
        """The steps `first`..`last`."""
        if not self.ahead:
            return StepsRead(self._loaded(first, last, None, None))
        cursors = self.trace.cursor(), self.trace.cursor()  # made here, read there
        return StepsRead(ReadAhead(self._loaded(first, last, *cursors)))

    def _loaded(
        self, first: int, last: int, steps_on: Cursor | None, rows_on: Cursor | None
    ) -> Generator[tuple[_StepsRange, _RangeRows], None, None]:
        """Each range of the steps with its rows."""
        for steps_range in self._step_ranges(first, last, steps_on):
            yield steps_range, self._load(steps_range, rows_on)

    def _step_ranges(self, first: int, last: int, on: Cursor | None) -> Iterator[_StepsRange]:
        """The steps `first`..`last` (`sql/decision_steps.sql`) cut into ranges of rows."""
        reader = self.trace.stream(query("decision_steps"), self.batch_rows, [first, last], on)
        for batch in reader:
            steps = {name: batch.column(name).to_pylist() for name in batch.schema.names}
            for start, end in _ranges(steps["num_scheduled_reqs"], self.batch_rows):
                yield _StepsRange(steps, start, end)

    def _load(self, steps_range: _StepsRange, on: Cursor | None) -> _RangeRows:
        """The range's scheduled rows, block ids and preemptions, cut per step."""
        first, last = steps_range.first, steps_range.last
        scheduled_rows = by_step_then_seq(self._rows("decision_scheduled", first, last, on))
        return _RangeRows(
            _StepBytes(scheduled_rows, _SCHEDULED),
            _StepBytes(self._rows("decision_block_ids", first, last, on), _BLOCKS),
            _StepIndices(self._rows("decision_preemptions", first, last, on)),
        )

    def _rows(self, name: str, first: int, last: int, on: Cursor | None) -> pa.Table:
        return self.trace.stream(query(name), self.batch_rows, [first, last], on).read_all()


class StepsRead:
    """`RecordedSteps.between`'s steps; `close()` stops any reading ahead."""

    def __init__(self, loaded: Iterator[tuple[_StepsRange, _RangeRows]]) -> None:
        self._loaded = loaded
        self._steps = chain.from_iterable(starmap(_range_steps, loaded))

    def __iter__(self) -> StepsRead:
        return self

    def __next__(self) -> RecordedStep:
        return next(self._steps)

    def close(self) -> None:
        close = getattr(self._loaded, "close", None)
        if close is not None:
            close()


@dataclass(frozen=True, slots=True)
class _StepsRange:
    """Steps `start`..`end - 1` of a batch of `_steps` columns."""

    steps: dict[str, list[Any]]
    start: int
    end: int

    @property
    def first(self) -> int:
        return int(self.steps["step"][self.start])

    @property
    def last(self) -> int:
        return int(self.steps["step"][self.end - 1])


@dataclass(frozen=True, slots=True)
class _RangeRows:
    """A range's rows of the step tables, cut per step."""

    scheduled: _StepBytes
    blocks: _StepBytes
    preempted: _StepIndices


def _range_steps(steps_range: _StepsRange, rows: _RangeRows) -> Iterator[RecordedStep]:
    """The range's `RecordedStep`s."""
    steps = steps_range.steps
    free_blocks, update_steps = steps["num_free_blocks_after_schedule"], steps["update_step"]
    for i in range(steps_range.start, steps_range.end):
        step = steps["step"][i]
        if steps["idle"][i]:
            yield RecordedStep(step, True, None, None)
            continue
        request_indices, num_tokens, kinds, sampled = rows.scheduled.of(step)
        block_requests, block_ids = rows.blocks.of(step)
        yield RecordedStep(
            step,
            False,
            free_blocks[i],
            update_steps[i],
            request_indices,
            num_tokens,
            kinds,
            sampled,
            block_requests,
            block_ids,
            rows.preempted.of(step),
        )


def _ranges(num_rows: list[int | None], batch_rows: int) -> Iterator[tuple[int, int]]:
    """Consecutive index ranges of steps holding about `batch_rows` scheduled rows each."""
    start, total = 0, 0
    for i, rows in enumerate(num_rows):
        total += rows or 0
        if total >= batch_rows:
            yield start, i + 1
            start, total = i + 1, 0
    if start < len(num_rows):
        yield start, len(num_rows)


def _step_runs(table: pa.Table) -> dict[int, tuple[int, int]]:
    """Each step's rows in `table` (sorted by step): step -> (start, end)."""
    if table.num_rows == 0:
        return {}
    runs = pc.run_end_encode(table["step"].combine_chunks())
    found, start = {}, 0
    for step, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist(), strict=True):
        found[step] = (start, end)
        start = end
    return found


class _StepBytes:
    """A range's rows of some columns as native bytes, cut per step."""

    def __init__(self, table: pa.Table, columns: tuple[tuple[str, pa.DataType, int], ...]):
        self.runs = _step_runs(table)
        self.columns = [column_view(table, *spec) for spec in columns]

    def of(self, step: int) -> list[bytes]:
        """Each column's bytes for `step`'s rows (empty when it has none)."""
        start, end = self.runs.get(step, (0, 0))
        return [view[start * width : end * width].tobytes() for view, width in self.columns]


def column_view(
    table: pa.Table, name: str, arrow_type: pa.DataType, null_as: int
) -> tuple[memoryview, int]:
    """The column's values as native bytes of `arrow_type`, and the width of one."""
    width = arrow_type.bit_width // 8
    if table.num_rows == 0:
        return memoryview(b""), width
    array = table[name].combine_chunks().cast(arrow_type)
    if array.null_count:
        array = pc.fill_null(array, pa.scalar(null_as, arrow_type))
    offset = array.offset * width
    return memoryview(array.buffers()[1])[offset : offset + len(array) * width], width


class _StepIndices:
    """A range's preempted request indices (a few rows per step) as tuples, cut per step."""

    def __init__(self, table: pa.Table) -> None:
        self.runs = _step_runs(table)
        self.indices = table["request_index"].to_pylist() if table.num_rows else []

    def of(self, step: int) -> tuple[int, ...]:
        start, end = self.runs.get(step, (0, 0))
        return tuple(self.indices[start:end])
