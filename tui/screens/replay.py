"""Replay mode: the scheduler re-runs the trace's inputs live, beside the recording."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import duckdb
from rich.console import Group
from rich.table import Table
from rich.text import Text
from stepscope.engine import InputError
from stepscope.schema import StepDetail, TraceError
from stepscope.tracer.writer import TraceWriteError
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from stepscope.safe_text import safe_rich_text, safe_text, shown_id, shown_lines, shown_text

from ..messages import (
    QueryFailed,
    ReplayAdvanced,
    ReplayProgress,
    ReplayReady,
    ReplayRecorded,
    query_failed,
)
from ..replay_session import BreakPredicate, ReplayedStep, ReplaySession
from ..widgets.auto_width_table import AutoWidthTable
from .goto_step import GotoStepScreen

_ERRORS = (TraceError, InputError, TraceWriteError, duckdb.Error)
"""What a replay can fail with: a trace, its inputs, or writing the replay (a full disk)."""

MAX_LOG_ROWS = 500


class ReplayHeadShown(Message):
    """A replay from a step has recorded and compared its first steps: `step` (the one
    it started at) and its sides, while the rest is recorded."""

    def __init__(self, step: ReplayedStep, sides: tuple[StepDetail, StepDetail]) -> None:
        super().__init__()
        self.step = step
        self.sides = sides


def decision_panel(title: str, detail: StepDetail, differs: tuple[str, ...]) -> Group:
    """One side's decision at a step (`read_step`), as a Rich renderable."""
    head = Text(title, style="bold")
    row = detail.row
    if row is None:
        return Group(head, Text("no such step", style="dim"))
    if row["idle"]:
        return Group(head, Text(f"step {detail.step:,}: idle", style="dim"))
    red = "bold red"
    head.append(f"  step {detail.step:,}")
    table = Table(box=None, pad_edge=False, show_edge=False)
    table.add_column("request")
    table.add_column("tokens", justify="right")
    table.add_column("kind")
    for scheduled in detail.scheduled.dicts():
        table.add_row(
            Text(shown_id(scheduled["request_id"])),
            safe_rich_text(str(scheduled["num_tokens"])),
            safe_rich_text(str(scheduled["kind"])),
        )
    facts = Text()
    facts.append(
        f"free blocks after schedule: {row['num_free_blocks_after_schedule']}",
        style=red if "num_free_blocks" in differs else "",
    )
    facts.append(" · preempted: ")
    preempted = ", ".join(map(shown_id, sorted(detail.request_ids("preempt")))) or "—"
    facts.append(preempted, style=red if "preempted" in differs else "")
    style = red if "scheduled" in differs else ""
    return Group(head, facts, Text("scheduled", style=style or "bold"), table)


class ReplayScreen(Screen[int | None]):
    """Step the replay, continue to the next divergence, or run until a SQL condition holds."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space,s", "step", "step"),
        Binding("c", "continue", "to next divergence"),
        Binding("b", "break_on", "break when…"),
        Binding("colon", "goto", "go to step", show=False),  # in the help, not the footer
        Binding("escape", "escape", "stop / back"),
    ]

    HELP = """
## Replay

The workload is rebuilt from the trace (config, requests, aborts, what the model
sampled) and the scheduler runs it again, recorded like any run, then compared with
the recording step by step as `stepscope replay` compares them. Left: the recording;
right: the replay; differences in red. Opened on a step past 0, it replays from
there (from the nearest checkpoint; the line under the header says); `:` goes to a
step, replaying again from an earlier one.

`space` steps, `c` runs to the next divergent step, `b` runs until a SQL
condition over the replayed step holds, e.g. `num_free_blocks_after_schedule < 10`
or `list_contains(preempted_ids, 'r42')` (columns: step, idle, num_scheduled_tokens,
num_scheduled_reqs, num_preemptions, num_finished, num_free_blocks_after_schedule,
running_pass_end, admission_stop, scheduled_ids, preempted_ids, finished_ids,
arrived_ids). `escape` stops the replay or a run (what was replayed is compared), or
goes back to the timeline at this step.
"""

    def __init__(self, path: Path, at_step: int | None = None) -> None:
        super().__init__()
        self.path = path
        self.at_step = at_step or None
        """The step the replay starts at and shows first (None: step 0, shown on `space`)."""
        self.session: ReplaySession | None = None
        self._opened: ReplaySession | None = None
        """The session as soon as its worker has made it (before `ReplayReady` lands)."""
        self._left = False
        self.last: ReplayedStep | None = None
        self._replay_running = False
        self._predicate: BreakPredicate | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="replay-start")
        yield Static(
            Text("rebuilding the workload from the trace…", style="dim"), id="replay-status"
        )
        with Horizontal(id="replay-sides"):
            yield Static("", id="replay-recorded", classes="replay-side")
            yield Static("", id="replay-replayed", classes="replay-side")
        yield AutoWidthTable(id="replay-log", cursor_type="row", zebra_stripes=True)
        yield Input(
            placeholder="break when (SQL over the replayed step), enter runs", id="replay-break"
        )
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = safe_text(f"replay · {self.path.name}")
        log = self.query_one("#replay-log", DataTable)
        log.add_columns("step", "tokens", "reqs", "preempted", "free", "recorded vs replayed")
        log.focus()
        self.query_one("#replay-break", Input).display = False
        self.query_one("#replay-start", Static).display = False
        self.start_session(self.at_step)

    def on_unmount(self) -> None:
        self._left = True
        session = self.session or self._opened
        if session is not None:
            session.stop()
            session.close()  # once a running worker has seen the stop

    # -- workers -------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="replay-open")
    def start_session(self, at_step: int | None) -> None:
        try:
            session = self._opened = ReplaySession(self.path, at_step=at_step)
            if self._left:  # the screen went while the session was made
                session.close()
                return
            self.post_message(ReplayReady(session))
            session.record(on_progress=self._post_progress, on_head=self._post_head)
        except _ERRORS as error:
            self.post_message(query_failed(error, "replay"))
            return
        self.post_message(ReplayRecorded())

    def _post_head(self, step: ReplayedStep, sides: tuple[StepDetail, StepDetail]) -> None:
        self.post_message(ReplayHeadShown(step, sides))

    @work(thread=True, group="replay-run")
    def advance(
        self,
        session: ReplaySession,
        mode: str,
        predicate: BreakPredicate | None,
        target: int | None = None,
    ) -> None:
        steps: tuple[ReplayedStep, ...]
        try:
            if mode == "step":
                replayed = session.step()
                steps, stopped = ((replayed,), "step") if replayed else ((), "end")
            elif mode == "goto":
                assert target is not None
                replayed, reached = session.go_to(target)
                self.post_message(ReplayAdvanced((replayed,), "step", reached))
                return
            else:
                found, stopped = session.run(predicate, on_progress=self._post_progress)
                steps = tuple(found)
            sides = session.sides(steps[-1].step) if steps else None
        except _ERRORS as error:
            self.post_message(query_failed(error, "replay"))
            return
        self.post_message(ReplayAdvanced(steps, stopped, sides))

    def _post_progress(self, step: int) -> None:
        self.post_message(ReplayProgress(step))

    # -- handlers ------------------------------------------------------------------

    def on_replay_ready(self, message: ReplayReady) -> None:
        self.session = message.session
        self._replay_running = True
        if message.session.at_step:
            where = f"replaying from step {message.session.at_step:,}…"
        else:
            where = "replaying the trace…"
        self._status(f"{where} (escape stops)", "yellow")

    def on_replay_head_shown(self, message: ReplayHeadShown) -> None:
        session = self.session
        if session is None or message.step.step != session.at_step:
            return  # a session since replaced
        self._show_start(session)
        self._show_steps((message.step,), message.sides)
        self._status(f"at step {message.step.step:,}; replaying the rest… (escape stops)", "yellow")

    def on_replay_recorded(self, message: ReplayRecorded) -> None:
        self._replay_running = False
        session = self.session
        assert session is not None
        self._show_start(session)
        requests = session.num_requests
        replayed = f"{session.num_replayed_steps:,} replayed"
        if session.first_step:
            replayed += f" (steps {session.first_step:,}..{session.replay_end - 1:,})"
        if session.stopped:
            replayed += " (stopped)"
        self._status(
            f"ready: {requests} requests and {session.num_recorded_steps:,} recorded steps, "
            f"{replayed}, {session.num_divergent:,} divergent. space steps, c runs to the "
            "next divergence, b breaks on a condition, : goes to a step",
            "",
        )
        shown = self.last.step if self.last is not None else None
        if session.at_step and session.cursor >= session.first_step and shown != session.cursor:
            self._replay_running = True  # the step it starts at, not shown with a head
            self.advance(session, "goto", None, session.cursor)

    def on_replay_advanced(self, message: ReplayAdvanced) -> None:
        self._replay_running = False
        session = self.session
        assert session is not None
        self._show_steps(message.steps, message.sides)
        last = self.last
        where = f"replayed through step {last.step:,}" if last else "nothing replayed"
        verdict = {
            "end": "the replay has ended",
            "stopped": "stopped",
            "condition": "the condition holds" if self._predicate else "diverged here",
            "step": "",
        }[message.stopped]
        through = session.num_divergent_through(last.step) if last else 0
        divergent = f"{through:,} divergent steps so far"
        if last is not None and last.diverged:
            self._status(
                f"{where} · DIVERGES: {', '.join(last.differences)} · {divergent}", "bold red"
            )
        else:
            self._status(" · ".join(filter(None, [where, verdict, divergent])), "green")

    def on_replay_progress(self, message: ReplayProgress) -> None:
        if self._replay_running:
            self._status(f"replaying… at step {message.step:,} (escape stops)", "yellow")

    def on_query_failed(self, message: QueryFailed) -> None:
        self._replay_running = False
        self._status(f"{message.what}: {message.error}", "bold red")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        condition = event.value.strip()
        event.input.display = False
        self.query_one("#replay-log", DataTable).focus()
        if not condition or self.session is None:
            return
        try:
            predicate = BreakPredicate(condition)
        except TraceError as error:
            self._status(f"bad condition: {error}", "bold red")
            return
        self._predicate = predicate
        self._go("run", predicate)

    # -- actions -------------------------------------------------------------------

    def action_step(self) -> None:
        self._go("step", None)

    def action_continue(self) -> None:
        self._predicate = None
        self._go("run", None)

    def action_break_on(self) -> None:
        field = self.query_one("#replay-break", Input)
        field.display = True
        field.focus()

    def action_goto(self) -> None:
        def chosen(step: int | None) -> None:
            if step is not None:
                self.go_to(step)

        self.app.push_screen(GotoStepScreen(), chosen)

    def go_to(self, step: int) -> None:
        """Move the cursor to `step` if the replay holds it; before the replay's first
        step, replay again from `step`."""
        session = self.session
        if session is None:
            return
        if self._replay_running:
            self._status("the replay is still running (escape stops it)", "yellow")
            return
        last = max(session.num_steps, session.num_recorded_steps) - 1
        if step < 0 or step > last:
            self._status(f"no step {step:,}: the steps are 0..{last:,}", "bold red")
        elif step < session.first_step:
            self._restart(step)
        elif step >= session.num_steps:
            self._status(f"the replay ended before step {step:,}", "bold red")
        else:
            self._replay_running = True
            self._status(f"going to step {step:,}…", "yellow")
            self.advance(session, "goto", None, step)

    def _restart(self, step: int) -> None:
        """Replay again, from `step` (the session before closed)."""
        old = self.session
        self.session = self._opened = None
        if old is not None:
            old.close()
        self.last = None
        self.at_step = step
        self.query_one("#replay-log", DataTable).clear()
        for side in ("#replay-recorded", "#replay-replayed"):
            self.query_one(side, Static).update("")
        self._replay_running = True
        self._status(f"replaying again, from step {step:,}…", "yellow")
        self.start_session(step)

    def action_escape(self) -> None:
        field = self.query_one("#replay-break", Input)
        if field.display:
            field.display = False
            self.query_one("#replay-log", DataTable).focus()
        elif self._replay_running and self.session is not None:
            self.session.stop()
        else:
            self.dismiss(self.last.step if self.last is not None else None)

    def _go(self, mode: str, predicate: BreakPredicate | None) -> None:
        if self.session is None or self._replay_running:
            return
        if self.session.finished:
            self._status("the replay has ended", "green")
            return
        self._replay_running = True
        self._status("stepping… (escape stops)", "yellow")
        self.advance(self.session, mode, predicate)

    # -- helpers -------------------------------------------------------------------

    def _status(self, text: str, style: str) -> None:
        self.query_one("#replay-status", Static).update(Text(shown_text(text), style=style))

    def _show_start(self, session: ReplaySession) -> None:
        """Where the replay started, under the header (and in it); why not where asked."""
        start = session.start
        if start is None or not (session.at_step or session.notice):
            return
        self.sub_title = safe_text(f"replay · {self.path.name} · {start.describe()}")
        lines = [start.describe()]
        if session.notice:
            lines.append(session.notice)
        line = self.query_one("#replay-start", Static)
        line.update(Text(shown_lines("\n".join(lines)), style="bold" if session.notice else ""))
        line.display = True

    def _show_steps(
        self, steps: tuple[ReplayedStep, ...], sides: tuple[StepDetail, StepDetail] | None
    ) -> None:
        log = self.query_one("#replay-log", DataTable)
        for replayed in steps:
            self._add_log_row(log, replayed)
        if steps:
            self.last = steps[-1]
        if sides is not None and self.last is not None:
            self._show_sides(sides, self.last.differences)

    def _show_sides(self, sides: tuple[StepDetail, StepDetail], differs: tuple[str, ...]) -> None:
        recorded, replayed = sides
        self.query_one("#replay-recorded", Static).update(
            decision_panel("recorded", recorded, differs)
        )
        self.query_one("#replay-replayed", Static).update(
            decision_panel("replayed", replayed, differs)
        )

    def _add_log_row(self, log: DataTable[object], replayed: ReplayedStep) -> None:
        columns = replayed.columns
        verdict = (
            Text("≠ " + ", ".join(replayed.differences), style="bold red")
            if replayed.diverged
            else Text("=", style="green")
        )
        if columns is None:
            cells: list[object] = ["—", "—", Text("—"), "—"]
        else:
            free = columns["num_free_blocks_after_schedule"]
            cells = [
                str(columns["num_scheduled_tokens"]),
                str(columns["num_scheduled_reqs"]),
                Text(", ".join(map(shown_id, columns["preempted_ids"]))),
                "" if free is None else str(free),
            ]
        log.add_row(f"{replayed.step:,}", *cells, verdict)
        while log.row_count > MAX_LOG_ROWS:
            log.remove_row(next(iter(log.rows)))
        log.move_cursor(row=log.row_count - 1)
