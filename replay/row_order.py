"""Rows read in the order they were recorded, put in the order a reader needs.

A step table's rows are recorded by step, then `seq`; DuckDB returns a scan's rows in
that insertion order, and sorting them again costs more than reading them. So a reader
reads them unordered, checks the order column-wise, and sorts only when it does not hold.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def by_step_then_seq(table: pa.Table) -> pa.Table:
    """`table` (with `step` and `seq`) in step, then seq order."""
    if _rising(table["step"], table["seq"]):
        return table
    return table.sort_by([("step", "ascending"), ("seq", "ascending")])


def request_then_step(requests: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The row indices that put rows by request, then step (the two as integer columns)."""
    if len(steps) < 2 or bool(np.all(steps[1:] >= steps[:-1])):
        # A stable sort keeps the steps' order; on 16-bit keys numpy's is a radix sort.
        keys = requests.astype(np.uint16) if _fits_uint16(requests) else requests
        return np.argsort(keys, kind="stable")
    return np.lexsort((steps, requests))


def _fits_uint16(values: np.ndarray) -> bool:
    return len(values) == 0 or (int(values.min()) >= 0 and int(values.max()) <= 0xFFFF)


def _rising(step: pa.ChunkedArray, seq: pa.ChunkedArray | None) -> bool:
    """Whether `step` never falls from row to row (nor, with `seq`, (step, seq) fails to rise)."""
    steps = step.combine_chunks()
    if len(steps) < 2:
        return bool(steps.null_count == 0)
    later, earlier = steps[1:], steps[:-1]
    if seq is None:
        rising = pc.greater_equal(later, earlier)
    else:
        seqs = seq.combine_chunks()
        same_step = pc.and_(pc.equal(later, earlier), pc.greater(seqs[1:], seqs[:-1]))
        rising = pc.or_(pc.greater(later, earlier), same_step)
    return pc.all(rising, skip_nulls=False).as_py() is True
