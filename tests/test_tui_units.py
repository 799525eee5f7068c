"""The TUI's pieces without a screen: bars, flags, plot resampling, decode folding, lookups."""

from __future__ import annotations

from stepscope.schema import Rows
from stepscope.tui.replay_session import ReplaySession
from stepscope.tui.trace_source import TraceSource, fold_decodes
from stepscope.tui.widgets.step_plot import resample, sparkline
from stepscope.tui.widgets.step_table import budget_bar, flags
from tui_support import trace


def test_budget_bar_in_eighths() -> None:
    assert budget_bar(0, 512) == "········"
    assert budget_bar(512, 512) == "████████"
    assert budget_bar(256, 512) == "████····"
    assert budget_bar(60, 512) == "█·······"
    assert budget_bar(40, 512) == "▋·······"
    assert budget_bar(9999, 512) == "████████"
    assert budget_bar(3, 0) == "········"


def test_flags_name_why_a_step_is_interesting() -> None:
    row = {"num_preemptions": 0, "admission_stop": "no_waiting", "running_pass_end": "all_visited"}
    assert flags(row, divergent=False) == ""
    assert flags(row, divergent=True) == "≠"
    assert flags({**row, "num_preemptions": 2}, divergent=False) == "P"
    assert flags({**row, "admission_stop": "kv_full_sequence"}, divergent=False) == "K"
    assert flags({**row, "running_pass_end": "budget"}, divergent=False) == "B"


def test_plot_resampling_stretches_and_squeezes() -> None:
    assert resample((1.0, 3.0), 4, "mean") == [1.0, 1.0, 3.0, 3.0]
    assert resample((1.0, 3.0, 5.0, 7.0), 2, "mean") == [2.0, 6.0]
    assert resample((4.0, 2.0, 9.0, 1.0), 2, "min") == [2.0, 1.0]
    assert resample((), 3, "mean") == []
    assert sparkline([0.0, 0.5, 1.0], 1.0) == "▁▅█"
    assert sparkline([3.0], 0) == "▁"


def test_consecutive_decodes_fold_into_one_row() -> None:
    columns = ("step", "what", "num_tokens", "computed_before", "computed_after",
               "blocks_held", "detail", "sampled_token")  # fmt: skip
    rows = Rows(
        columns,
        (
            (0, "admit+prefill", 30, 0, 30, 2, "blocks +[1, 2]", "7"),
            (1, "decode", 1, 30, 31, 2, None, "8"),
            (2, "decode", 1, 31, 32, 3, "blocks +[5]", "9"),
            (3, "decode", 1, 32, 33, 3, None, "10"),
            (3, "preempted", None, None, None, 0, "by r1", None),
            (9, "decode", 1, 33, 34, 3, None, "11"),
        ),
    )
    life = fold_decodes(rows)
    assert [(r.first_step, r.last_step, r.what) for r in life] == [
        (0, 0, "admit+prefill"),
        (1, 3, "decode ×3"),
        (3, 3, "preempted"),
        (9, 9, "decode"),
    ]
    decodes = life[1]
    assert (decodes.num_tokens, decodes.computed_before, decodes.computed_after) == (3, 30, 33)
    assert decodes.detail == "blocks +[5]" and decodes.sampled == "8 … 10"


def test_finding_a_request_by_id_prefix_or_part() -> None:
    source = TraceSource(trace("storm"))
    assert source.find_request("chat-07") == "chat-07"
    assert source.find_request("chat-1") == "chat-10"
    assert source.find_request("23") == "chat-23"
    assert source.find_request("CHAT-2") == "chat-20"
    assert source.find_request("nobody") is None


def test_trace_source_pages_and_steps() -> None:
    source = TraceSource(trace("storm"))
    assert source.info.num_steps == 380 and source.info.complete
    assert source.info.token_budget == 512 and source.info.num_usable_blocks == 40
    page = source.page(2)
    assert page.num_rows == 124 and page.column("step")[0].as_py() == 256
    assert source.page(3).num_rows == 0
    assert source.interesting_step(0, forward=True) == 2
    assert source.interesting_step(379, forward=False) == 274
    detail = source.step_detail(3)
    assert detail.request_ids("preempt") == ["chat-19", "chat-18", "chat-17", "chat-16"]
    plot = source.plot()
    assert len(plot.budget_use) == 380 and plot.num_free_blocks[0] == 24


def test_replayed_decisions_match_the_recorded_ones_step_by_step() -> None:
    session = ReplaySession(trace("storm"))
    session.record()
    first = session.step()
    assert first is not None and not first.diverged
    recorded, replayed = session.sides(0)
    decided = ("scheduled", "allocations", "preemptions", "events")  # the row has timings
    assert all(
        list(getattr(recorded, name).dicts()) == list(getattr(replayed, name).dicts())
        for name in decided
    )
    scheduled = next(replayed.scheduled.dicts())
    assert (scheduled["request_id"], scheduled["num_tokens"], scheduled["kind"]) == (
        "chat-00",
        30,
        "new",
    )
    assert first.columns is not None
    assert first.columns["arrived_ids"] == [f"chat-0{i}" for i in range(8)]
    assert first.columns["num_scheduled_tokens"] == 240
    session.close()
