"""Sweep result files laid out as `stepscope sweep` writes them, from rows a test chooses."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

METRICS: tuple[tuple[str, str], ...] = (
    ("num_steps", "INTEGER"),
    ("num_preemptions", "INTEGER"),
    ("recomputed_tokens", "BIGINT"),
    ("ttft_mean_steps", "DOUBLE"),
    ("ttft_p90_steps", "DOUBLE"),
    ("ttft_p99_steps", "DOUBLE"),
    ("tpot_mean_steps", "DOUBLE"),
    ("tpot_p90_steps", "DOUBLE"),
    ("tpot_p99_steps", "DOUBLE"),
    ("ttft_p99_s", "DOUBLE"),
    ("tpot_p99_s", "DOUBLE"),
    ("ttft_mean_s", "DOUBLE"),
    ("tpot_mean_s", "DOUBLE"),
    ("kv_usage_mean", "DOUBLE"),
    ("kv_usage_max", "DOUBLE"),
    ("tokens_per_step", "DOUBLE"),
    ("num_finished", "INTEGER"),
    ("num_rejected", "INTEGER"),
    ("kept_trace", "VARCHAR"),
)
"""The metric columns after the knobs, in order, with their types."""


def write_sweep(
    path: Path,
    trace: Path | str,
    grid: Mapping[str, Sequence[Any]],
    points: Sequence[Mapping[str, Any]],
    knob_types: Mapping[str, str] | None = None,
    fit_problem: str | None = None,
) -> Path:
    """A result with one row per entry of `points` (knob values and metrics; the rest NULL)."""
    knob_types = knob_types or {knob: "INTEGER" for knob in grid}
    meta = {
        "sweep_schema_version": "1",
        "trace": str(trace),
        "trace_sha256": "0" * 64,
        "scheduler": "stepscope.engine.scheduler.Scheduler",
        "grid": json.dumps({knob: list(values) for knob, values in grid.items()}),
        "fit_r2": "0.9" if fit_problem is None else "0.1",
        "fit_ok": "true" if fit_problem is None else "false",
        "fit_problem": fit_problem,
    }
    columns = [("point", "INTEGER"), *((k, knob_types[k]) for k in grid), *METRICS]
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE sweep_meta (key VARCHAR, value VARCHAR)")
        con.executemany("INSERT INTO sweep_meta VALUES (?, ?)", list(meta.items()))
        con.execute(f"CREATE TABLE sweep_points ({', '.join(f'{n} {t}' for n, t in columns)})")
        for number, point in enumerate(points):
            values = [point.get(name, number if name == "point" else None) for name, _ in columns]
            con.execute(
                f"INSERT INTO sweep_points VALUES ({', '.join('?' * len(columns))})", values
            )
    return path
