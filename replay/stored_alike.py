"""How many leading steps two traces stored alike, row for row, so their fingerprints
need not be computed.

Two traces whose decision tables hold the same rows, in the same order, up to some
step decided every step before it the same way (the fingerprints hash nothing else), so
the diff hashes only the steps from there on. Tables are compared a block of rows at a
time, a memory comparison; a table not stored in step order (or different request ids)
makes the answer 0, and every step is fingerprinted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from stepscope.schema import Trace

from .sql import query

ALL_STEPS = 2**31 - 1
"""The largest step a trace can hold (an INTEGER): `stored_alike`'s answer when the two
traces stored the same rows throughout, and the end of a window that has none."""

_BLOCK = 1 << 16
"""Rows compared at once while looking for the first that differs."""

_STEP_TABLES = ("fingerprint_steps", "fingerprint_scheduled", "stored_block_ids",
                "stored_preemptions", "stored_inputs")  # fmt: skip
"""The queries whose rows a step's fingerprints are made of, each with a `step` column."""


@dataclass(frozen=True)
class StoredRows:
    """A trace's rows that its step fingerprints are made of, as stored."""

    request_ids: pa.Table
    by_step: dict[str, pa.Table]
    """Each of `_STEP_TABLES`'s results."""


def stored_rows(trace: Trace, steps: tuple[int, int] = (0, ALL_STEPS)) -> StoredRows:
    """The rows of the steps `steps` (first, last) its fingerprints are made of."""
    tables = {name: trace.sql(query(name), list(steps)).to_arrow_table() for name in _STEP_TABLES}
    return StoredRows(trace.sql(query("request_ids")).to_arrow_table(), tables)


def stored_alike(a: StoredRows, b: StoredRows) -> int:
    """The first step whose rows may differ between the traces (`ALL_STEPS`: none does)."""
    if not a.request_ids.equals(b.request_ids):
        return 0
    return min(_first_step_apart(a.by_step[name], b.by_step[name]) for name in _STEP_TABLES)


def _first_step_apart(a: pa.Table, b: pa.Table) -> int:
    """The step of the first row where the two tables differ (0 unless both are in step
    order: then every step before it has the same rows in both)."""
    steps = [table["step"].to_numpy() for table in (a, b)]
    if not all(bool(np.all(s[1:] >= s[:-1])) for s in steps):
        return 0
    row = _first_row_apart(a, b)
    if row is None:
        return ALL_STEPS
    return min(int(s[row]) for s in steps if row < s.size)


def _first_row_apart(a: pa.Table, b: pa.Table) -> int | None:
    """The index of the first row that differs (or that one table lacks), None if none."""
    if a.equals(b):
        return None
    common = int(min(a.num_rows, b.num_rows))
    for start in range(0, common, _BLOCK):
        length = min(_BLOCK, common - start)
        if not a.slice(start, length).equals(b.slice(start, length)):
            return start + _first_apart_within(a.slice(start, length), b.slice(start, length))
    return common


def _first_apart_within(a: pa.Table, b: pa.Table) -> int:
    """The first row that differs between two tables of equal length that differ."""
    low, high = 0, int(a.num_rows) - 1
    while low < high:
        middle = (low + high) // 2
        if a.slice(0, middle + 1).equals(b.slice(0, middle + 1)):
            low = middle + 1
        else:
            high = middle
    return low
