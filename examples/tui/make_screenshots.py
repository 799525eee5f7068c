"""Record the preemption-storm example and save SVG screenshots of the TUI's main screens.

python examples/tui/make_screenshots.py        # writes docs/images/tui-*.svg
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from stepscope.engine import TapeModelRunner, parse_workload
from stepscope.tracer.record_workload import record_workload
from stepscope.tui.app import StepscopeApp
from textual.pilot import Pilot
from textual.widgets import Static, TextArea

HERE = Path(__file__).parent
EXAMPLE = HERE.parent / "preemption_storm" / "workload.json"
SIZE = (150, 44)
SHOTS = HERE.parent.parent / "docs" / "images"


def record(path: Path, max_num_seqs: int | None = None) -> Path:
    raw = json.loads(EXAMPLE.read_text())
    if max_num_seqs is not None:
        raw["config"]["max_num_seqs"] = max_num_seqs
    workload = parse_workload(json.dumps(raw), source=str(EXAMPLE))
    tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
    record_workload(workload, TapeModelRunner(tapes), path)
    return path


async def settle(pilot: Pilot[Any]) -> None:
    for _ in range(6):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0)


async def until(pilot: Pilot[Any], condition: Callable[[], bool]) -> None:
    while not condition():
        await settle(pilot)
        await asyncio.sleep(0.01)


def status(pilot: Pilot[Any], selector: str) -> str:
    return str(pilot.app.screen.query_one(selector, Static).render())


async def shoot(
    app: StepscopeApp, name: str, scenario: Callable[[Pilot[Any]], Awaitable[None]]
) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await scenario(pilot)
        await settle(pilot)
        app.save_screenshot(str(SHOTS / f"tui-{name}.svg"))
        print(f"docs/images/tui-{name}.svg")


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        storm = record(Path(folder) / "preemption_storm.duckdb")
        fewer = record(Path(folder) / "preemption_storm_max_num_seqs_18.duckdb", 18)

        async def timeline(pilot: Pilot[Any]) -> None:
            await pilot.press("colon", "3", "enter")

        async def request(pilot: Pilot[Any]) -> None:
            await pilot.press("slash", *"chat-18", "enter")

        async def diff(pilot: Pilot[Any]) -> None:
            await until(pilot, lambda: "divergent" in status(pilot, "#diff-banner"))
            await pilot.press("d")

        async def console(pilot: Pilot[Any]) -> None:
            await pilot.press("s")
            await settle(pilot)
            editor = pilot.app.screen.query_one("#console-query", TextArea)
            editor.text = "SELECT step, request_id, needed_by, why FROM why_preempted"
            await pilot.press("ctrl+j")
            await until(pilot, lambda: "rows" in status(pilot, "#console-status"))

        async def replay(pilot: Pilot[Any]) -> None:
            await pilot.press("p")
            await until(pilot, lambda: status(pilot, "#replay-status").startswith("ready"))
            await pilot.press("b", *"list_contains(preempted_ids, 'chat-18')", "enter")
            await until(pilot, lambda: "condition holds" in status(pilot, "#replay-status"))

        await shoot(StepscopeApp(storm), "timeline", timeline)
        await shoot(StepscopeApp(storm), "request", request)
        await shoot(StepscopeApp(storm, fewer), "diff", diff)
        await shoot(StepscopeApp(storm), "console", console)
        await shoot(StepscopeApp(storm), "replay", replay)


if __name__ == "__main__":
    asyncio.run(main())
