"""Save SVG screenshots of `stepscope tui` on a sweep result: its points, and one point's diff.

    cd FOLDER_OF_THE_RESULT && python .../screenshot.py capacity.duckdb 22

writes `tui-sweep.svg` (the points) and `tui-point.svg` (point 22's kept trace diffed with
the swept trace) beside this script.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from stepscope.tui.app import StepscopeApp
from stepscope.tui.screens.sweep_point import SweepPointScreen
from textual.pilot import Pilot
from textual.widgets import DataTable

HERE = Path(__file__).parent
SIZE = (120, 56)
MAX_ROUNDS = 2000


async def until(pilot: Pilot[Any], ready: Any) -> None:
    """Let workers finish and messages land until `ready()` holds."""
    for _ in range(MAX_ROUNDS):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0)
        if ready():
            return
        await asyncio.sleep(0.01)
    raise SystemExit("the screen never got ready")


async def settle(pilot: Pilot[Any]) -> None:
    """A few more rounds, so widgets that draw on idle (the footer, column widths) have."""
    for _ in range(20):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0)
        await asyncio.sleep(0.01)


async def shoot(result: Path, point: int) -> None:
    app = StepscopeApp(result)
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot, lambda: app.screen.query(DataTable) and app.screen.query_one(DataTable).row_count
        )
        await settle(pilot)
        app.save_screenshot(str(HERE / "tui-sweep.svg"))
        await pilot.press(*["down"] * point, "enter")

        def diffed() -> bool:
            screen = app.screen
            return isinstance(screen, SweepPointScreen) and screen.diff is not None

        await until(pilot, diffed)
        await settle(pilot)
        app.save_screenshot(str(HERE / "tui-point.svg"))


if __name__ == "__main__":
    asyncio.run(shoot(Path(sys.argv[1]), int(sys.argv[2])))
