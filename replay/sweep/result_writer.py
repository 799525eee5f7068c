"""A sweep's result file: `sweep_meta` and `sweep_points`, written whole or not at all.

Each file is written under a temporary name in its folder and renamed into place, so a
reader never sees half a result, and a failed or interrupted sweep leaves nothing behind.
The Parquet copy holds `sweep_points`, with `sweep_meta` as the file's key-value metadata.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from stepscope.engine import InputError
from stepscope.tracer.held_signals import signals_held

from .grid import SweepGrid
from .metrics import METRIC_TYPES

SWEEP_SCHEMA_VERSION = 1


def kept_folder(output: Path) -> Path:
    """Where `--keep` puts the points' traces: beside the result, `<name>.points/`."""
    return output.with_name(f"{output.stem}.points")


def points_table(
    grid: SweepGrid, metrics: Mapping[int, Mapping[str, Any]], kept: Mapping[int, Path]
) -> pa.Table:
    """One row per point, in point order: the point, its knobs, its metrics, its kept trace."""
    indices = [point.index for point in grid.points]
    columns: dict[str, pa.Array] = {"point": pa.array(indices, pa.int32())}
    for name, kind in grid.column_types().items():
        columns[name] = pa.array([row[name] for row in grid.columns], kind)
    for name, kind in METRIC_TYPES.items():
        columns[name] = pa.array([metrics[i][name] for i in indices], kind)
    paths = [str(kept[i]) if i in kept else None for i in indices]
    columns["kept_trace"] = pa.array(paths, pa.string())
    return pa.table(columns)


def meta_table(meta: Mapping[str, str | None]) -> pa.Table:
    return pa.table(
        {"key": pa.array(list(meta), pa.string()), "value": pa.array(list(meta.values()))},
        schema=pa.schema([("key", pa.string()), ("value", pa.string())]),
    )


def write_result(
    output: Path,
    parquet: Path | None,
    points: pa.Table,
    meta: Mapping[str, str | None],
    before_rename: Callable[[], None],
) -> None:
    """The DuckDB result renamed into place, then the Parquet copy when asked.

    `before_rename` runs once the result is written in full (it puts the kept traces in
    place). A Parquet copy that cannot be written is an error that says the result is kept.
    """
    with _temporaries([output]) as (temporary,):
        with duckdb.connect(str(temporary)) as con:
            con.from_arrow(meta_table(meta)).create("sweep_meta")
            con.from_arrow(points).create("sweep_points")
        with signals_held():  # a stop now would leave part of the result in place
            before_rename()
            os.replace(temporary, output)
    if parquet is not None:
        _write_parquet(parquet, _with_metadata(points, meta), output)


def _write_parquet(parquet: Path, points: pa.Table, output: Path) -> None:
    try:
        with _temporaries([parquet]) as (temporary,):
            pq.write_table(points, temporary, compression="zstd")
            os.replace(temporary, parquet)
    except (OSError, pa.ArrowException) as error:
        reason = getattr(error, "strerror", None) or error
        raise InputError(f"--parquet {parquet}: cannot write there ({reason}); the result is "
                         f"kept in {output}") from None  # fmt: skip


def kept_paths(output: Path, names: Mapping[int, str]) -> dict[int, Path]:
    """Each kept trace's final path, by point."""
    folder = kept_folder(output).resolve()
    return {index: folder / name for index, name in names.items()}


def move_kept(traces: Mapping[int, Path], final: Mapping[int, Path]) -> None:
    """The kept traces moved from the work folder to their final paths."""
    for index, path in traces.items():
        final[index].parent.mkdir(exist_ok=True)
        shutil.move(path, final[index])


def _with_metadata(points: pa.Table, meta: Mapping[str, str | None]) -> pa.Table:
    """`sweep_meta` as the file's key-value metadata (a NULL value is left out)."""
    metadata = {key: value for key, value in meta.items() if value is not None}
    return points.replace_schema_metadata(metadata)


@contextmanager
def _temporaries(targets: Sequence[Path]) -> Iterator[list[Path]]:
    """A hidden temporary name beside each target; whatever is left of them is removed."""
    temporaries = [t.with_name(f".{t.name}.{os.getpid()}.tmp") for t in targets]
    try:
        yield temporaries
    finally:
        for temporary in temporaries:
            temporary.unlink(missing_ok=True)
            temporary.with_name(temporary.name + ".wal").unlink(missing_ok=True)
