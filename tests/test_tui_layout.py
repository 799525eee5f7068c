"""What a column or a prompt shows fits it: a budget of many digits, the sweep's prompts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from stepscope.engine.workload import parse_workload
from stepscope.tui.app import StepscopeApp
from stepscope.tui.screens.sweep_objectives import SweepObjectivesScreen
from stepscope.tui.widgets.step_table import StepTable
from sweep_results import write_sweep
from test_tui_sweep_snapshot import GRID, _points
from textual.pilot import Pilot
from textual.widgets import DataTable, Label
from traces import record
from tui_support import drive, loaded, press, screen_text, until


def _prefill_trace(folder: Path, budget: int) -> Path:
    """Prompts enough to fill a `budget`-token first step, all arriving at once."""
    num_requests = budget // 100
    requests = [
        {"id": f"p{i}", "prompt_token_ids": [1000 + 128 * i + t for t in range(128)],
         "output_token_ids": [5, 2], "max_tokens": 4, "eos_token_id": 2}
        for i in range(num_requests)
    ]  # fmt: skip
    config = {"block_size": 16, "num_blocks": 10 * num_requests + 8,
              "max_num_batched_tokens": budget, "max_num_seqs": num_requests,
              "max_model_len": 256}  # fmt: skip
    text = json.dumps({"config": config, "requests": requests, "max_steps": 100})
    path = folder / f"budget{budget}.duckdb"
    record(parse_workload(text, source="prefill"), path)
    return path


@pytest.mark.parametrize("budget", [2048, 16384])
def test_a_budget_of_many_digits_keeps_the_bar_and_the_tokens_apart(
    tmp_path: Path, budget: int
) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        table = pilot.app.screen.query_one(StepTable)
        text = screen_text(pilot.app)
        step_zero = next(line for line in text.splitlines() if re.match(r"^..\s+0 ", line))
        # The whole count, a space from the bar; the columns after it in their place.
        assert re.search(rf"[█▏▎▍▌▋▊▉·] +{budget}/{budget} ", step_zero), step_zero
        header = next(line for line in text.splitlines() if "tokens" in line)
        assert header.index("tokens") + len("tokens") == step_zero.index(f"/{budget}") + len(
            f"/{budget}"
        )
        admission = header.index("admission")
        assert step_zero[admission:].split()[0] in ("budget", "max_num_seqs", "no_waiting")
        assert table.region.width >= table.row_width

    drive(StepscopeApp(_prefill_trace(tmp_path, budget)), scenario, size=(160, 40))


@pytest.mark.parametrize(("key", "words"), [("s", "sort by"), ("f", "front and plot")])
def test_the_sweep_prompts_show_whole(tmp_path: Path, key: str, words: str) -> None:
    path = write_sweep(tmp_path / "sweep.duckdb", "storm.duckdb", GRID, _points())

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: pilot.app.screen.query_one(DataTable).row_count == 8)
        await press(pilot, key)
        assert isinstance(pilot.app.screen, SweepObjectivesScreen)
        label = pilot.app.screen.query_one(Label)
        x, y, width, height = label.region
        rows = screen_text(pilot.app).splitlines()[y : y + height]
        shown = " ".join(row[x : x + width].strip() for row in rows)
        assert shown.startswith(words)
        assert shown.endswith("([min:|max:]COLUMN; a bare column takes its usual sense)")

    drive(StepscopeApp(path), scenario, size=(120, 44))
