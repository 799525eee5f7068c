"""Token ids read from a trace as tuples in which equal ids are one Python int.

A replay holds every request's prompt and tape for the whole run. Converted value
by value, each token was its own int: 36 bytes (28 for the int, 8 for the
reference). A vocabulary has far fewer ids than a trace has tokens, so each id is made
once and every tuple refers to it: 8 bytes a token. They stay tuples: a tape is
read a token per request every step, and an `array` makes a new int each read
(slower engine steps: `benchmarks/RESULTS.md`, replay_speed).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

TABLE_IDS = 1 << 20
"""Ids below this are looked up in a table of every id up to the largest (real
vocabularies are under 300k ids); others, such as a redacted trace's 63-bit
pseudonyms, are found by sorting."""


def shared(tokens: np.ndarray) -> np.ndarray:
    """`tokens` (integers) as an object array in which equal ids are one Python int."""
    if len(tokens) == 0:
        return np.empty(0, dtype=object)
    if int(tokens.min()) >= 0 and int(tokens.max()) < TABLE_IDS:
        ids, positions = np.array(range(int(tokens.max()) + 1), dtype=object), tokens
    else:
        values, positions = np.unique(tokens, return_inverse=True)
        ids = np.array(values.tolist(), dtype=object)
    result: np.ndarray = ids[positions]
    return result


def cut(tokens: np.ndarray, ends: list[int]) -> list[tuple[int, ...]]:
    """`tokens` cut at `ends` (each piece's end, in order), each piece a tuple of shared ints."""
    ints = shared(tokens)
    pieces, start = [], 0
    for end in ends:
        pieces.append(tuple(ints[start:end].tolist()))
        start = end
    return pieces


def list_column(column: pa.ChunkedArray) -> list[tuple[int, ...]]:
    """Each row of a list-of-integers column (no NULL list, no NULL item) as such a tuple."""
    lists = column.combine_chunks()
    if len(lists) == 0:
        return []
    offsets = lists.offsets.to_numpy()
    values = lists.values.to_numpy()[offsets[0] : offsets[-1]]
    return cut(values, (offsets[1:] - offsets[0]).tolist())
