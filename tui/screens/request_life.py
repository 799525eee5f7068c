"""A request's whole life on one screen: arrival, chunks, decodes, preemptions, finish."""

from __future__ import annotations

from typing import Any, ClassVar

import duckdb
from rich.text import Text
from stepscope.schema import TraceError
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from stepscope.safe_text import safe_rich_text, shown_id, shown_text

from ..messages import QueryFailed, RequestLifeLoaded, query_failed
from ..models import RequestLife
from ..trace_source import TraceSource
from ..widgets.auto_width_table import AutoWidthTable

_WHAT_STYLE = {
    "arrive": "bold",
    "finish": "bold green",
    "abort": "bold red",
    "reject": "bold red",
    "preempted": "bold red",
}


def facts_text(life: RequestLife) -> Text:
    facts = life.facts
    text = Text()
    text.append(shown_id(life.request_id), style="bold")
    text.append(
        f"   arrived at step {facts['arrival_step']:,} · prompt {facts['prompt_len']} tokens · "
        f"max_tokens {facts['max_tokens']} · priority {facts['priority']}"
    )
    ending = (
        f"finished at step {facts['finish_step']:,} ({shown_text(str(facts['finish_reason']))})"
        if facts["finish_step"] is not None
        else "still running when the trace ends"
    )
    first_token = (
        f"first token at step {facts['first_token_step']:,} ({facts['ttft_steps']} steps)"
        if facts["first_token_step"] is not None
        else "no token sampled"
    )
    text.append(
        f"\n{ending} · {facts['num_output_tokens']} output tokens · {first_token} · "
        f"preempted {facts['num_preemptions']}×"
    )
    return text


def _value(value: Any) -> str:
    return "" if value is None else str(value)


class RequestLifeScreen(Screen[int | None]):
    """One request from `request_timeline`; enter jumps the timeline to the row's step."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "back"),
        Binding("enter", "jump", "go to step"),
    ]

    HELP = """
## Request life

Every step of one request: arrival, each prefill chunk (computed tokens before →
after), decodes (runs of consecutive decode steps folded into one row),
preemptions with what they cost, resumption and recompute, finish, and the KV
blocks it held. Below: the steps it spent waiting, and why.

`enter` goes to the highlighted row's step in the timeline.
"""

    def __init__(self, source: TraceSource, request_id: str) -> None:
        super().__init__()
        self.source = source
        self.request_id = request_id
        self.life: RequestLife | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text(f"{shown_id(self.request_id)}: loading…", style="dim"), id="life-facts")
        yield AutoWidthTable(id="life-table", cursor_type="row", zebra_stripes=True)
        yield Static("waiting", classes="detail-heading")
        yield AutoWidthTable(id="life-waiting", cursor_type="none")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"request {shown_id(self.request_id)}"
        table = self.query_one("#life-table", DataTable)
        table.add_columns("steps", "what", "tokens", "computed", "blocks", "sampled", "detail")
        table.focus()
        waiting = self.query_one("#life-waiting", DataTable)
        waiting.add_columns("steps", "reason", "blocked head", "detail")
        waiting.can_focus = False
        self.load_life()

    @work(thread=True, exclusive=True, group="life")
    def load_life(self) -> None:
        try:
            life = self.source.request_life(self.request_id)
        except (TraceError, duckdb.Error) as error:
            self.post_message(query_failed(error, f"request {shown_id(self.request_id)}"))
            return
        self.post_message(RequestLifeLoaded(life, self.request_id))

    def on_request_life_loaded(self, message: RequestLifeLoaded) -> None:
        facts = self.query_one("#life-facts", Static)
        life = self.life = message.life
        if life is None:
            missing = shown_id(message.request_id)
            facts.update(Text(f"no request {missing} in this trace", style="bold red"))
            return
        facts.update(safe_rich_text(facts_text(life)))
        table = self.query_one("#life-table", DataTable)
        table.clear()
        for row in life.life:
            steps = (
                f"{row.first_step:,}"
                if row.first_step == row.last_step
                else f"{row.first_step:,}–{row.last_step:,}"
            )
            computed = (
                f"{row.computed_before}→{row.computed_after}"
                if row.computed_before is not None
                else ""
            )
            table.add_row(
                steps,
                Text(shown_text(row.what), style=_WHAT_STYLE.get(row.what, "")),
                _value(row.num_tokens),
                computed,
                _value(row.blocks_held),
                Text(shown_text(row.sampled)),
                Text(shown_text(row.detail or "")),
            )
        waiting = self.query_one("#life-waiting", DataTable)
        waiting.clear()
        for first, last, reason, blocked, detail in life.waiting.rows:
            steps = f"{first:,}" if first == last else f"{first:,}–{last:,}"
            waiting.add_row(
                steps,
                Text(shown_text(str(reason))),
                Text(shown_id(blocked or "")),
                Text(shown_text(detail or "")),
            )

    def on_query_failed(self, message: QueryFailed) -> None:
        text = shown_text(f"{message.what}: {message.error}")
        self.notify(text, severity="error", timeout=8, markup=False)

    def action_back(self) -> None:
        self.dismiss(None)

    def action_jump(self) -> None:
        if self.life is None or not self.life.life:
            return
        row = self.query_one("#life-table", DataTable).cursor_row
        self.dismiss(self.life.life[min(max(row, 0), len(self.life.life) - 1)].first_step)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_jump()
