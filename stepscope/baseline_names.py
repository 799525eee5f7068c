"""Short names that tell traces apart: each path's shortest tail no other path ends with."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def distinct_names(paths: Sequence[Path]) -> list[str]:
    """`a/case.duckdb` and `b/case.duckdb` for two cases of one name; `case.duckdb` when unique."""
    parts = [path.parts for path in paths]
    return [_shortest_unique_tail(mine, parts) for mine in parts]


def _shortest_unique_tail(mine: tuple[str, ...], everyone: list[tuple[str, ...]]) -> str:
    for length in range(1, len(mine) + 1):
        tail = mine[-length:]
        clashes = sum(1 for other in everyone if other[-length:] == tail)
        if clashes == 1:
            return str(Path(*tail))
    return str(Path(*mine))
