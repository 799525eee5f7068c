"""Rewrites a finished trace into a fresh file, the same tables in fewer bytes.

While recording, each checkpoint compresses the rows written since the last one,
so a long trace ends up as many part-filled segments plus the blocks earlier
checkpoints freed. Copied whole into a new file, every column is compressed in
full row groups and no block is free: about a sixth smaller on chat traffic.
The copy replaces the trace in one rename, so a reader or a crash sees either
the old file or the new one, never part of either.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path

import duckdb

logger = logging.getLogger("stepscope.tracer")

COMPACT_FROM_BYTES = 4 << 20
"""Smaller traces are left as written: the copy would save a few blocks at most."""

_ORIGINAL, _COPY = "recorded", "compacted"

Config = Mapping[str, str | bool | int | float | list[str]]


def compact(path: Path, config: Config) -> None:
    """Replace the closed trace at `path` by a compacted copy; on failure keep it as it is."""
    if path.stat().st_size < COMPACT_FROM_BYTES:
        return
    copy = path.with_name(path.name + ".compacting")
    try:
        _copy(path, copy, config)
        os.replace(copy, path)
    except (duckdb.Error, OSError) as error:
        logger.warning("stepscope: %s kept as written (compacting it failed: %s)", path, error)
        for leftover in (copy, copy.with_name(copy.name + ".wal")):
            with contextlib.suppress(OSError):
                leftover.unlink()


def _copy(path: Path, copy: Path, config: Config) -> None:
    """Copy every type, table, comment and row of `path` into the new file `copy`."""
    with contextlib.suppress(FileNotFoundError):
        copy.unlink()
    con = duckdb.connect(":memory:", config=dict(config))
    try:
        con.execute("SET enable_progress_bar = false")
        # The catalogs' names are identifiers: constants spliced in.
        con.execute(f"ATTACH ? AS {_ORIGINAL} (READ_ONLY)", [str(path)])
        con.execute(f"ATTACH ? AS {_COPY}", [str(copy)])
        con.execute(f"COPY FROM DATABASE {_ORIGINAL} TO {_COPY}")
        con.execute(f"DETACH {_COPY}")
    finally:
        con.close()
