"""The step detail's drafts, driven by keys on recorded speculative-decoding traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import TESTS
from stepscope.tui.app import StepscopeApp
from stepscope.tui.widgets.rows_view import RowsView
from stepscope.tui.widgets.step_detail import StepDetailView
from textual.pilot import Pilot
from textual.widgets import Static
from traces import record
from tui_support import cells, drive, press, screen_text, trace

SPEC = TESTS / "conformance_spec"


def spec_trace(prefix: str, folder: Path) -> Path:
    (case,) = sorted(SPEC.glob(f"{prefix}*.json"))
    return record(case, folder / f"{case.stem}.duckdb").path


def _drafts(pilot: Pilot[Any]) -> list[list[str]]:
    view = pilot.app.screen.query_one("#detail-a", StepDetailView)
    return cells(view.query_one(".detail-drafts", RowsView))


def _shown(pilot: Pilot[Any]) -> bool:
    view = pilot.app.screen.query_one("#detail-a", StepDetailView)
    heading = view.query_one(".detail-drafts-heading", Static)
    return heading.display and view.query_one(".detail-drafts", RowsView).display


def test_drafts_are_marked_accepted_or_rejected(tmp_path: Path) -> None:
    """60: at step 1 A's three drafts are all accepted and B's all rejected; at 2, B keeps one."""

    async def scenario(pilot: Pilot[Any]) -> None:
        assert _shown(pilot)
        assert _drafts(pilot) == [
            ["A", "", "", "886", "221 743 353"],
            ["B", "", "", "420", "639 740 544"],
        ]
        await press(pilot, "j")
        assert _drafts(pilot) == [
            ["A", "221✓ 743✓ 353✓", "3/3", "221 743 353 990", "348 794 879"],
            ["B", "639✗ 740✗ 544✗", "0/3", "638", "739 544 578"],
        ]
        text = await press(pilot, "j")
        assert ["B", "739✓ 544✗ 578✗", "1/3", "739 543", "577 748 646"] in _drafts(pilot)
        assert "drafts" in text and "739✓ 544✗ 578✗" in text

    drive(StepscopeApp(spec_trace("60", tmp_path)), scenario, size=(140, 60))


def test_padding_drafts_read_pad(tmp_path: Path) -> None:
    """63: B is admitted with one token left and padded with two -1 drafts, both rejected."""

    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "j", "j")
        assert ["B", "pad✗ pad✗", "0/2", "266", "407 581"] in _drafts(pilot)

    drive(StepscopeApp(spec_trace("63", tmp_path)), scenario, size=(140, 60))


def test_without_speculative_decoding_there_is_no_drafts_section() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        assert not _shown(pilot)
        assert "pad✗" not in screen_text(pilot.app)

    drive(StepscopeApp(trace("storm")), scenario)
