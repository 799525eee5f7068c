"""Per-step fingerprints of a trace's decisions, for comparing two traces step by step.

One row per step: its own columns (idle, update step, free blocks) and 64-bit
fingerprints of its scheduled rows (`decision`: request, tokens, kind and position in
the step; `sampled`: request, sampled token and position), the block ids handed out, the
requests preempted and the step's inputs (arrivals, rejects, aborts). A scheduled row's
fields are combined into one word (the request's id hash, XOR the mixed position, plus
each other field times an odd constant: distinct rows give distinct words unless 64-bit
hashes coincide), mixed by splitmix64's finalizer, and a step's words are XORed. Two
steps that differ in any field of any row thus get the same fingerprint with
probability about 2^-64, some 10^-13 over a million steps. Requests are named by the
hash of their id, so traces of different workloads compare. The scheduled rows (most of
a trace) are hashed here in a few vector passes rather than grouped by step in SQL, which
cost more; the smaller tables that are sets are fingerprinted in SQL.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from stepscope.schema import Trace

from .sql import query
from .stored_alike import ALL_STEPS, StoredRows, stored_rows

U64 = npt.NDArray[np.uint64]
Ints = npt.NDArray[np.int64]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
"""splitmix64's constants: its two multipliers and its increment (an odd 64-bit spread)."""

_CHUNK = 1 << 17
"""Rows hashed in one go: small enough that each pass's arrays stay in cache."""

_SET_FIELDS = ("blocks", "preempted", "inputs")
"""The `fingerprint_sets.sql` fields, fingerprinted in SQL."""


def step_fingerprints(
    trace: Trace, rows: StoredRows | None = None, start: int = 0, last: int = ALL_STEPS
) -> pa.Table:
    """One row per step of `rows` (`stored_rows`: every step, or a window's), by step: (step,
    idle, update_step, num_free_blocks, decision, sampled, blocks, preempted, inputs); the
    fingerprints of steps before `start` are 0 (for steps `stored_alike` found stored alike
    in the other trace), and none is made past `last`."""
    rows = stored_rows(trace) if rows is None else rows
    steps = _numpy(rows.by_step["fingerprint_steps"])
    if not bool(np.all(steps["step"][1:] >= steps["step"][:-1])):
        order = np.argsort(steps["step"], kind="stable")
        steps = {name: column[order] for name, column in steps.items()}
    scheduled = _from_step(rows.by_step["fingerprint_scheduled"], start)
    decision, sampled = _scheduled_fingerprints(trace, scheduled, steps["step"])
    columns = {**steps, "decision": decision, "sampled": sampled}
    columns.update(_set_fingerprints(trace, steps["step"], start, last))
    return pa.table(columns)


def _from_step(table: pa.Table, start: int) -> dict[str, Any]:
    """The rows of steps `start` on (`start` > 0 only for tables in step order)."""
    if start > 0:
        table = table.slice(int(np.searchsorted(table["step"].to_numpy(), start)))
    return _numpy(table)


def _numpy(table: pa.Table) -> dict[str, Any]:
    """The table's columns as numpy arrays."""
    return {column: table[column].to_numpy() for column in table.column_names}


def _where(table: pa.Table, column: str, value: str) -> pa.Table:
    """The rows whose text `column` holds `value`."""
    return table.filter(pc.equal(table[column], value))


def mix(x: U64) -> U64:
    """splitmix64's finalizer, in place: a bijection of 64-bit words in which every input
    bit flips each output bit with probability about one half."""
    shifted = np.empty_like(x)
    for shift, multiplier in ((30, _M1), (27, _M2)):
        np.right_shift(x, np.uint64(shift), out=shifted)
        np.bitwise_xor(x, shifted, out=x)
        np.multiply(x, multiplier, out=x)
    np.right_shift(x, np.uint64(31), out=shifted)
    return np.bitwise_xor(x, shifted, out=x)


def _scheduled_fingerprints(trace: Trace, rows: dict[str, Ints], steps: Ints) -> tuple[U64, U64]:
    """The `decision` and `sampled` fingerprint of each step (0 where nothing ran)."""
    if rows["step"].size == 0:
        return np.zeros(steps.size, np.uint64), np.zeros(steps.size, np.uint64)
    requests, present, kinds = _name_hashes(trace)
    rows = _of_known_requests(_in_step_order(rows), present)
    starts = _run_starts(rows["step"])
    ends = np.append(starts[1:], rows["step"].size)
    first_seq = rows["seq"][starts]
    positions = mix(np.arange(int((rows["seq"][ends - 1] - first_seq).max()) + 1, dtype=np.uint64))
    decision, sampled = np.empty(starts.size, np.uint64), np.empty(starts.size, np.uint64)
    for low, high in _chunks(starts):
        chunk = {name: column[starts[low] : ends[high - 1]] for name, column in rows.items()}
        counts = ends[low:high] - starts[low:high]
        position = chunk["seq"] - np.repeat(first_seq[low:high], counts)
        named = requests[chunk["request_index"]]
        named ^= positions[position]
        local = starts[low:high] - starts[low]
        for out, words in (
            (decision, _decision_words(chunk, kinds)),
            (sampled, _sampled_words(chunk)),
        ):
            words += named
            out[low:high] = np.bitwise_xor.reduceat(mix(words), local)
    at = rows["step"][starts]
    return _aligned(decision, at, steps), _aligned(sampled, at, steps)


def _decision_words(rows: dict[str, Ints], kinds: U64) -> U64:
    """Each row's tokens and kind in one word (before its request and position are added)."""
    words = rows["num_tokens"].astype(np.uint64)
    words *= _GOLDEN
    words += kinds[rows["kind"]]
    return words


def _sampled_words(rows: dict[str, Ints]) -> U64:
    words = rows["sampled"].astype(np.uint64)
    words *= _GOLDEN
    return words


def _chunks(starts: Ints) -> list[tuple[int, int]]:
    """Ranges of steps (indices into `starts`) of about `_CHUNK` rows each."""
    total = int(starts[-1]) + 1
    bounds = np.unique(np.searchsorted(starts, np.arange(0, total, _CHUNK)))
    edges = [*bounds.tolist(), starts.size]
    return [(low, high) for low, high in pairwise(edges) if low < high]


def _of_known_requests(rows: dict[str, Ints], present: npt.NDArray[np.bool_]) -> dict[str, Ints]:
    """The rows whose request the trace names (a row of an unknown request is not hashed)."""
    index = rows["request_index"]
    if index.size == 0 or (index.max() < present.size and present[index].all()):
        return rows
    known = index < present.size
    known[known] = present[index[known]]
    return {name: column[known] for name, column in rows.items()}


def _name_hashes(trace: Trace) -> tuple[U64, npt.NDArray[np.bool_], U64]:
    """Each request's id hash by request index (and which indices exist), and each
    `request_kind` label's hash by enum code."""
    table = trace.sql(query("fingerprint_names")).to_arrow_table()
    by_kind = []
    for kind in ("request", "kind"):
        rows = _where(table, "kind", kind)
        codes, hashes = rows["code"].to_numpy(), rows["name_hash"].to_numpy()
        size = int(codes.max()) + 1 if codes.size else 0
        values, present = np.zeros(size, np.uint64), np.zeros(size, np.bool_)
        values[codes], present[codes] = hashes, True
        by_kind.append((values, present))
    (requests, present), (kinds, _) = by_kind
    return requests, present, kinds


def _in_step_order(rows: dict[str, Ints]) -> dict[str, Ints]:
    """The rows by step, then seq: as stored unless storage says otherwise."""
    step, seq = rows["step"], rows["seq"]
    if bool(np.all(seq[1:] > seq[:-1])) and bool(np.all(step[1:] >= step[:-1])):
        return rows
    order = np.lexsort((seq, step))
    return {name: column[order] for name, column in rows.items()}


def _run_starts(step: Ints) -> Ints:
    """The index of each step's first row (rows in step order)."""
    if step.size == 0:
        return np.zeros(0, np.int64)
    return np.concatenate(([0], np.flatnonzero(step[1:] != step[:-1]) + 1))


def _aligned(values: U64, at: Ints, steps: Ints) -> U64:
    """`values` (one per step in `at`) placed by step in `steps` (sorted), 0 elsewhere;
    a step `steps` lacks is dropped."""
    out = np.zeros(steps.size, np.uint64)
    if np.array_equal(steps, np.arange(steps.size)):
        keep = (at >= 0) & (at < steps.size)
        out[at[keep]] = values[keep]
        return out
    where = np.searchsorted(steps, at).clip(max=max(steps.size - 1, 0))
    keep = steps[where] == at if steps.size else np.zeros(at.size, np.bool_)
    out[where[keep]] = values[keep]
    return out


def _set_fingerprints(trace: Trace, steps: Ints, start: int, last: int) -> dict[str, U64]:
    """The `fingerprint_sets.sql` fingerprints of each step from `start` to `last`, by field."""
    table = trace.sql(query("fingerprint_sets"), [start, last]).to_arrow_table()
    out = {}
    for field in _SET_FIELDS:
        rows = _where(table, "field", field)
        out[field] = _aligned(rows["fingerprint"].to_numpy(), rows["step"].to_numpy(), steps)
    return out
