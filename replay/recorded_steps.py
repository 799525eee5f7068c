"""A trace's step decisions with their scheduled rows and block ids kept as column bytes.

The TUI's live replay reads the recorded decisions through these, decoded a step at a
time (`step_decision.RecordedDecisions`); a step's scheduled rows stay the bytes of
their Arrow columns (native integers, as `array` packs them) until then. Steps are read in
ranges of about `batch_rows` scheduled rows, each range's rows whole, so no step is
split between two reads; a range's rows are read in the order recorded (`row_order`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from stepscope.schema import Trace

from .row_order import by_step_then_seq
from .sql import query

SAMPLED_NONE = -(1 << 63)
"""The `sampled` value of a row that sampled nothing (a prefill chunk); no token id is negative."""

LAST_STEP = (1 << 31) - 1

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
    """A trace's `RecordedStep`s in step order, read a range of steps at a time."""

    def __init__(self, trace: Trace, batch_rows: int = 1 << 16) -> None:
        self.trace = trace
        self.batch_rows = batch_rows

    def between(self, first: int, last: int) -> Iterator[RecordedStep]:
        """The steps `first`..`last`."""
        reader = self.trace.stream(query("decision_steps"), self.batch_rows, [first, last])
        for batch in reader:
            steps = {name: batch.column(name).to_pylist() for name in batch.schema.names}
            for start, end in _ranges(steps["num_scheduled_reqs"], self.batch_rows):
                yield from self._range(steps, start, end)

    def _range(self, steps: dict[str, list[Any]], start: int, end: int) -> Iterator[RecordedStep]:
        first, last = steps["step"][start], steps["step"][end - 1]
        scheduled_rows = by_step_then_seq(self._rows("decision_scheduled", first, last))
        scheduled = _StepBytes(scheduled_rows, _SCHEDULED)
        blocks = _StepBytes(self._rows("decision_block_ids", first, last), _BLOCKS)
        preempted = _StepIndices(self._rows("decision_preemptions", first, last))
        free_blocks, update_steps = steps["num_free_blocks_after_schedule"], steps["update_step"]
        for i in range(start, end):
            step = steps["step"][i]
            if steps["idle"][i]:
                yield RecordedStep(step, idle=True, num_free_blocks=None, update_step=None)
                continue
            request_indices, num_tokens, kinds, sampled = scheduled.of(step)
            block_requests, block_ids = blocks.of(step)
            yield RecordedStep(
                step,
                idle=False,
                num_free_blocks=free_blocks[i],
                update_step=update_steps[i],
                request_indices=request_indices,
                num_tokens=num_tokens,
                kinds=kinds,
                sampled=sampled,
                block_requests=block_requests,
                block_ids=block_ids,
                preempted=preempted.of(step),
            )

    def _rows(self, name: str, first: int, last: int) -> pa.Table:
        return self.trace.stream(query(name), self.batch_rows, [first, last]).read_all()


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
