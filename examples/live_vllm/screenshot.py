"""Save an SVG screenshot of `stepscope tui` on a recorded vLLM trace, at its first preemption.

python examples/live_vllm/screenshot.py TRACE [OUT.svg]   # default: tui-live.svg beside it
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from stepscope.schema import open_trace
from stepscope.tui.app import StepscopeApp
from textual.pilot import Pilot

HERE = Path(__file__).parent
SIZE = (150, 44)


def first_preemption_step(trace_path: Path) -> int:
    with open_trace(trace_path) as trace:
        ((step,),) = trace.sql("SELECT coalesce(min(step), 0) FROM _preemptions").fetchall()
    return int(step)


async def settle(pilot: Pilot[Any]) -> None:
    for _ in range(6):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0)


async def shoot(trace_path: Path, out: Path) -> None:
    app = StepscopeApp(trace_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("colon", *str(first_preemption_step(trace_path)), "enter")
        await settle(pilot)
        app.save_screenshot(str(out))
    print(out)


if __name__ == "__main__":
    trace = Path(sys.argv[1])
    asyncio.run(shoot(trace, Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "tui-live.svg"))
