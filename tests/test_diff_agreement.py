"""`stepscope diff` and the TUI agree on every pair of a corpus of traces.

For each pair: the same divergent steps (every step one trace lacks included), the
same fields at the first divergence, the same classification; and the fields the TUI
marks different in its side-by-side view are those of exactly those steps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from stepscope.engine import Scheduler, StepRecord, Workload, load_workload
from stepscope.engine.step_plan import StepPlan
from stepscope.replay.diff import Classification, StepComparison, diff_traces
from stepscope.replay.exact import replay_exact
from stepscope.tui import diffing
from stepscope.tui.app import StepscopeApp
from stepscope.tui.trace_source import TraceSource
from stepscope.tui.widgets.diff_banner import DiffBanner
from stepscope.tui.widgets.step_detail import StepDetailView
from stepscope.tui.widgets.step_table import StepTable
from test_cli import stepscope
from textual.pilot import Pilot
from traces import case, record
from tui_support import STORM, drive, press, trace, until

EXPECTED = {
    "identical": Classification.IDENTICAL,
    "shorter": Classification.DECISION,
    "longer": Classification.DECISION,
    "config": Classification.DECISION,
    "config_and_length": Classification.DECISION,
    "scheduler": Classification.DECISION,
    "sampled_tokens": Classification.INPUT,
    "inputs_only": Classification.INPUTS_ONLY,
    "workload": Classification.INPUT,
    "block_ids_only": Classification.DECISION,
    "order_only": Classification.DECISION,
}
"""The corpus: each pair's name and the class of its first divergence."""


class AdmitAfterPreemption(Scheduler):
    """Drops the anti-thrash rule: admits even in a step that preempted."""

    def _may_admit(self, plan: StepPlan) -> bool:
        return True


def _changed_token(workload: Workload, request_id: str, position: int, token: int) -> Workload:
    requests = tuple(
        dataclasses.replace(
            spec,
            output_token_ids=tuple(
                token if i == position else t for i, t in enumerate(spec.output_token_ids)
            ),
        )
        if spec.request_id == request_id
        else spec
        for spec in workload.requests
    )
    return dataclasses.replace(workload, requests=requests)


def _interrupted(path: Path, at_step: int) -> Path:
    """The storm recording, killed at `at_step`: a shorter trace of the same run."""

    class Interrupt:
        def on_step(self, record_: StepRecord, scheduler: object) -> None:
            if record_.step == at_step:
                raise KeyboardInterrupt

    with contextlib.suppress(KeyboardInterrupt):
        record(load_workload(STORM), path, sinks=[Interrupt()], flush_every_steps=8)
    return path


def _edited(trace_path: Path, path: Path, statement: str) -> Path:
    """A copy of a trace with one statement applied to its tables."""
    shutil.copy(trace_path, path)
    with duckdb.connect(str(path)) as con:
        con.execute(statement)
    return path


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("agreement")
    storm, replayed = trace("storm"), folder / "replayed.duckdb"
    assert replay_exact(storm, output=replayed).divergence is None
    short = _interrupted(folder / "short.duckdb", at_step=120)
    fewer_blocks = folder / "fewer_blocks.duckdb"
    storm_workload = load_workload(STORM)
    config = dataclasses.replace(storm_workload.config, num_blocks=48)
    record(dataclasses.replace(storm_workload, config=config), fewer_blocks)
    anti_thrash, admitting = folder / "anti_thrash.duckdb", folder / "admitting.duckdb"
    record(case("06"), anti_thrash)
    record(case("06"), admitting, scheduler_cls=AdmitAfterPreemption)
    other_token = folder / "other_token.duckdb"
    record(_changed_token(storm_workload, "chat-05", 3, 4321), other_token)
    shifted = _edited(
        storm,
        folder / "shifted.duckdb",
        "UPDATE _block_ids SET block_id = block_id + 1000 WHERE step = 0",
    )
    # The same requests and tokens at step 1, two of them in the other order.
    swapped = _edited(
        storm,
        folder / "swapped.duckdb",
        "UPDATE _scheduled SET seq = CASE seq WHEN a THEN b "
        "ELSE a END FROM (SELECT min(seq) AS a, min(seq) + 1 AS b FROM _scheduled WHERE step = 1) "
        "WHERE step = 1 AND seq IN (a, b)",
    )
    return {
        "identical": (storm, replayed),
        "shorter": (storm, short),
        "longer": (short, storm),
        "config": (storm, trace("storm_fewer_seqs")),
        "config_and_length": (storm, fewer_blocks),
        "scheduler": (anti_thrash, admitting),
        "sampled_tokens": (storm, trace("storm_early_eos")),
        "inputs_only": (storm, other_token),
        "workload": (storm, trace("incomplete")),
        "block_ids_only": (storm, shifted),
        "order_only": (storm, swapped),
    }


def _per_step_differences(
    a: Path, b: Path, *, ignore_block_ids: bool
) -> dict[int, tuple[str, ...]]:
    """What the TUI's side-by-side view marks different at each step, read as it reads it."""
    tui = _tui_comparison(a, b, ignore_block_ids=ignore_block_ids)
    found = {step: tui.fields_at(step) for step in range(max(tui.num_steps))}
    return {step: names for step, names in found.items() if names}


def _tui_comparison(a: Path, b: Path, *, ignore_block_ids: bool = False) -> StepComparison:
    mine, theirs = TraceSource(a), TraceSource(b)
    try:
        return diffing.diff_traces(mine, theirs, ignore_block_ids=ignore_block_ids)
    finally:
        mine.close()
        theirs.close()


@pytest.mark.parametrize("name", list(EXPECTED))
@pytest.mark.parametrize("ignore_block_ids", [False, True], ids=["all", "ignore_block_ids"])
def test_the_tui_and_the_cli_agree(
    pairs: dict[str, tuple[Path, Path]], name: str, *, ignore_block_ids: bool
) -> None:
    a, b = pairs[name]
    cli = diff_traces(a, b, ignore_block_ids=ignore_block_ids)
    tui = _tui_comparison(a, b, ignore_block_ids=ignore_block_ids)
    expected = EXPECTED[name]
    if ignore_block_ids and name == "block_ids_only":
        expected = Classification.IDENTICAL
    assert cli.classification is tui.classification is expected
    assert tui.divergent_steps == cli.divergent_steps
    assert tui.decision_fields == cli.decision_fields
    assert tui.config_differences == cli.config_differences
    assert tui.headline == cli.headline
    per_step = _per_step_differences(a, b, ignore_block_ids=ignore_block_ids)
    assert list(per_step) == cli.divergent_steps
    if cli.first_decision_step is not None:
        assert per_step[cli.first_decision_step] == cli.decision_fields
    shorter, longer = sorted(cli.num_steps)
    assert all(per_step.get(step) == ("missing_step",) for step in range(shorter, longer))


def test_requests_in_another_order_differ(pairs: dict[str, tuple[Path, Path]]) -> None:
    cli = diff_traces(*pairs["order_only"])
    assert (cli.first_decision_step, cli.decision_fields) == (1, ("scheduled",))
    assert cli.divergent_steps == [1]


def test_the_shorter_trace_leaves_every_later_step_divergent(
    pairs: dict[str, tuple[Path, Path]],
) -> None:
    cli = diff_traces(*pairs["shorter"])
    shorter, longer = cli.num_steps[1], cli.num_steps[0]
    assert shorter < longer
    assert cli.divergent_steps == list(range(shorter, longer))
    assert cli.decision_fields == ("missing_step",)
    assert cli.headline[1] == "decision — one trace ends there, with the same inputs until then"


def test_the_cli_json_lists_what_the_tui_marks(pairs: dict[str, tuple[Path, Path]]) -> None:
    for name in ("shorter", "config_and_length"):
        a, b = pairs[name]
        result = stepscope("diff", str(a), str(b), "--json")
        assert result.returncode == 1, result.stderr
        data: dict[str, Any] = json.loads(result.stdout)
        tui = _tui_comparison(a, b)
        assert data["divergent_steps"] == tui.divergent_steps
        assert data["classification"] == str(tui.classification)
        assert data["decision_fields"] == list(tui.decision_fields)
        assert data["config_differences"] == {k: list(v) for k, v in tui.config_differences.items()}


def test_ignore_block_ids_needs_a_second_trace() -> None:
    result = stepscope("tui", str(trace("storm")), "--ignore", "block_ids")
    assert result.returncode == 2 and "--diff" in result.stderr
    result = stepscope("tui", str(trace("storm")), "--diff", str(trace("storm")),
                       "--ignore", "preempted")  # fmt: skip
    assert result.returncode == 2 and "only block_ids" in result.stderr


def _banner(pilot: Pilot[Any]) -> str:
    return str(pilot.app.screen.query_one(DiffBanner).render())


def test_d_walks_the_steps_the_shorter_trace_lacks(pairs: dict[str, tuple[Path, Path]]) -> None:
    storm, short = pairs["shorter"]
    num_storm, num_short = diff_traces(storm, short).num_steps
    app = StepscopeApp(storm, short)

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: "divergent" in _banner(pilot))
        assert (
            f"{num_storm - num_short} divergent steps; first divergence at step {num_short} "
            "(missing_step): decision — one trace ends there" in _banner(pilot)
        )
        steps = pilot.app.screen.query_one(StepTable)
        await press(pilot, "d")
        assert steps.cursor_step == num_short
        text = await press(pilot, "d")
        assert steps.cursor_step == num_short + 1
        marked = [line.split()[1] for line in text.splitlines() if line.startswith("≠")]
        assert str(num_short + 1) in marked  # a step only A has is flagged as A's own
        a = pilot.app.screen.query_one("#detail-a", StepDetailView)
        await until(pilot, lambda: "≠ missing_step" in str(a.query_one(".detail-summary").render()))
        await press(pilot, "G", "D")
        assert steps.cursor_step == num_storm - 2

    drive(app, scenario)


def test_the_tui_ignores_block_ids_as_the_cli_does(pairs: dict[str, tuple[Path, Path]]) -> None:
    a, b = pairs["block_ids_only"]
    assert stepscope("diff", str(a), str(b), "--ignore", "block_ids").returncode == 0
    app = StepscopeApp(a, b, ignore_block_ids=True)

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: "identical" in _banner(pilot))
        assert _banner(pilot).endswith("identical: every step decided the same")
        detail = pilot.app.screen.query_one("#detail-b", StepDetailView)
        await until(pilot, lambda: "step 0" in str(detail.query_one(".detail-summary").render()))
        assert "≠" not in str(detail.query_one(".detail-summary").render())

    drive(app, scenario)
