"""A snapshot of the sweep screen (pytest-textual-snapshot); `--snapshot-update` re-records it."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from stepscope.tui.app import StepscopeApp
from sweep_results import write_sweep
from textual.pilot import Pilot
from textual.widgets import DataTable
from tui_support import steady, until

GRID = {"num_blocks": [40, 64, 96, 129], "max_num_batched_tokens": [64, 512]}


def _points() -> list[dict[str, Any]]:
    """Shaped like the capacity example: blocks cut preemptions, the budget trades TTFT."""
    points = []
    for blocks, budget in itertools.product(*GRID.values()):
        preemptions = max(0, (129 - blocks) * 2 - budget // 64)
        kept = blocks == 129 and budget == 512
        points.append(
            {
                "num_blocks": blocks,
                "max_num_batched_tokens": budget,
                "num_preemptions": preemptions,
                "ttft_p99_steps": 1500.0 + preemptions * 20 - budget / 8,
                "tokens_per_step": 30.0 - preemptions / 10 + budget / 256,
                "kept_trace": "sweep.points/point-7.duckdb" if kept else None,
            }
        )
    return points


def test_sweep_screen(snap_compare: Any, tmp_path: Path) -> None:
    path = write_sweep(tmp_path / "sweep.duckdb", "storm.duckdb", GRID, _points())

    async def loaded(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: bool(pilot.app.screen.query(DataTable)))
        await until(pilot, lambda: pilot.app.screen.query_one(DataTable).row_count == 8)
        await steady(pilot)

    assert snap_compare(StepscopeApp(path), terminal_size=(120, 44), run_before=loaded)
