"""One step in full: scheduled requests, every allocation, every preemption, why passes stopped."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from stepscope.schema import StepDetail
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from stepscope.safe_text import safe_rich_text, shown_id, shown_text

from .rows_view import Cell, RowsView


def _ids(ids: list[str]) -> str:
    return ", ".join(map(shown_id, ids)) if ids else "—"


def summary_text(detail: StepDetail, differences: tuple[str, ...], title: str) -> Text:
    """The step's headline facts, as Rich text."""
    row = detail.row
    text = Text()
    text.append(f"{title}step {detail.step:,}", style="bold")
    if differences:
        text.append(f"   ≠ {', '.join(differences)}", style="bold red")
    if row is None:
        text.append("\nnot in this trace", style="dim")
        return text
    if row["idle"]:
        text.append("   idle: nothing to schedule", style="dim")
        text.append(f"\narrived {_ids(detail.request_ids('arrive'))}")
        return text
    text.append(
        f"   {row['num_scheduled_tokens']}/{row['token_budget']} tokens · "
        f"{row['num_scheduled_reqs']} requests ({row['num_new_reqs']} new, "
        f"{row['num_resumed_reqs']} resumed) · {row['num_preemptions']} preempted · "
        f"{row['num_finished']} finished"
    )
    text.append(
        f"\nfree blocks {row['num_free_blocks_before']} → "
        f"{row['num_free_blocks_after_schedule']} after schedule → "
        f"{row['num_free_blocks_after_update']} after update · running "
        f"{row['num_running_before']}→{row['num_running_after']} · waiting "
        f"{row['num_waiting_before']}→{row['num_waiting_after']}"
    )
    held = held_blocks_text(row.get("num_held_blocks_by_group"))
    if held:
        text.append(f"\nKV blocks per group {held}")
    text.append("\nrunning pass ended: ")
    text.append(shown_text(str(row["running_pass_end"])), style="bold cyan")
    text.append(" · admission stopped: ")
    text.append(shown_text(str(row["admission_stop"])), style="bold cyan")
    if row["blocked_request_id"]:
        text.append(f" (blocked head {shown_id(row['blocked_request_id'])})")
    text.append(
        f"\narrived {_ids(detail.request_ids('arrive'))} · finished "
        f"{_ids(detail.request_ids('finish'))} · aborted {_ids(detail.request_ids('abort'))}"
    )
    skips = skipped_text(detail)
    if skips:
        text.append("\nskipped: ")
        text.append(skips, style="yellow")
    return text


def held_blocks_text(num_held_blocks_by_group: list[int] | None) -> str:
    """Hybrid KV cache groups: the blocks each group holds after schedule (`g0 12 · g1 4`)."""
    if not num_held_blocks_by_group:
        return ""
    return " · ".join(f"g{group} {held}" for group, held in enumerate(num_held_blocks_by_group))


SKIP_REASONS = {
    "max_loras": "max_loras gate",
    "grammar_not_ready": "grammar not ready",
    "stale_output": "stale output in flight",
    "waiting_for_remote_kvs": "remote KV still arriving",
    "waiting_for_streaming_req": "waiting for streamed input",
    "cannot_schedule": "cannot be scheduled yet",
}
"""How the step detail names each reason the waiting pass passed a request over."""


def skipped_text(detail: StepDetail) -> str:
    """The requests the waiting pass passed over this step and why (`B (max_loras gate)`)."""
    return ", ".join(
        f"{shown_id(event['request_id'])} "
        f"({SKIP_REASONS.get(event['detail'], shown_text(event['detail'] or ''))})"
        for event in detail.events.dicts()
        if event["kind"] == "skip"
    )


def _blocks(block_ids: list[int] | None) -> str:
    if not block_ids:
        return ""
    shown = ",".join(map(str, block_ids[:6]))
    return f"+[{shown}{',…' if len(block_ids) > 6 else ''}]"


def _group_blocks(by_group: list[dict[str, Any]] | None) -> str:
    """Hybrid KV cache groups: each group's new blocks, `g1+[..]` (empty with one group)."""
    if not by_group:
        return ""
    return " ".join(f"g{g['kv_cache_group']}{_blocks(g['block_ids']) or '+[]'}" for g in by_group)


def _value(value: Any) -> str:
    return "" if value is None else str(value)


class StepDetailView(VerticalScroll, can_focus=False):
    """The step under the cursor: its SchedulerOutput, allocate_slots calls and preemptions."""

    HELP = """
## Step detail

The step under the timeline's cursor. **scheduled**: the SchedulerOutput in
vLLM's order (running, then admissions) with each request's kind, tokens,
computed tokens before → after, new block ids and the sampled token.
**allocations**: every `allocate_slots` call in order with the free blocks
before → after and whether it was granted (✓, with the new blocks) or which
check refused it (✗ `slots` or ✗ `full_sequence`). **preemptions**: the victim, who
needed room and what it cost. **drafts** (speculative decoding only): each
request's scheduled drafts, ✓ accepted or ✗ rejected (`pad`: a -1 draft, padding
or an async placeholder), the tokens the step appended and the drafts proposed after it.

`r` opens the highlighted request's life.
"""

    def __init__(self, title: str = "", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.side_title = title
        self.detail: StepDetail | None = None
        self._summary_lines = 0
        self.highlighted: frozenset[str] = frozenset()
        """The requests marked in every table (those of the finding chosen with `f`)."""

    def compose(self) -> ComposeResult:
        yield Static(Text("…", style="dim"), classes="detail-summary")
        yield Static("scheduled", classes="detail-heading")
        yield RowsView(
            ("request", "kind", "tokens", "computed", "sampled", "new blocks"),
            cursor=True,
            classes="detail-scheduled",
        )
        yield Static("allocations", classes="detail-heading")
        yield RowsView(
            ("request", "pass", "tokens", "+hit", "blocks", "free", "result"),
            classes="detail-allocations",
        )
        yield Static("preemptions", classes="detail-heading")
        yield RowsView(
            ("victim", "for", "discarded", "freed", "refund"),
            classes="detail-preemptions",
        )
        yield Static("", classes="detail-why")
        drafts_heading = Static("drafts", classes="detail-heading detail-drafts-heading")
        drafts = RowsView(
            ("request", "drafts", "accepted", "appended", "proposed"),
            classes="detail-drafts",
        )
        drafts_heading.display = drafts.display = False
        yield drafts_heading
        yield drafts

    def show(self, detail: StepDetail, differences: tuple[str, ...] = ()) -> None:
        self.detail = detail
        text = safe_rich_text(summary_text(detail, differences, self.side_title))
        summary = self.query_one(".detail-summary", Static)
        lines = len(text.wrap(self.app.console, max(summary.content_size.width, 1)))
        # A new layout only when the summary's height changes: most steps keep it.
        summary.update(text, layout=lines != self._summary_lines)
        self._summary_lines = lines
        marked = self.highlighted
        self._fill(".detail-scheduled", scheduled_rows(detail, marked))
        self._fill(".detail-allocations", allocation_rows(detail, marked))
        self._fill(".detail-preemptions", preemption_rows(detail, marked))
        whys = [
            f"{shown_id(p['request_id'])}: {shown_text(p['why'])}"
            for p in detail.preemptions.dicts()
        ]
        self.query_one(".detail-why", Static).update(Text("\n".join(whys)))
        self._fill(".detail-drafts", draft_rows(detail))
        has_drafts = len(detail.drafts) > 0
        self.query_one(".detail-drafts-heading", Static).display = has_drafts
        self.query_one(".detail-drafts", RowsView).display = has_drafts

    def highlight(self, request_ids: frozenset[str]) -> None:
        """Mark these requests' rows from now on (the step shown too)."""
        self.highlighted = request_ids
        if self.detail is not None:
            self.show(self.detail)

    def _fill(self, selector: str, rows: list[tuple[Cell, ...]]) -> None:
        self.query_one(selector, RowsView).set_rows(rows)

    def selected_request(self) -> str | None:
        """The request under the scheduled table's cursor (the first one when none is)."""
        if self.detail is None or not len(self.detail.scheduled):
            return None
        table = self.query_one(".detail-scheduled", RowsView)
        index = min(max(table.cursor_row, 0), len(self.detail.scheduled) - 1)
        return str(self.detail.scheduled.rows[index][0])


NO_MARKS: frozenset[str] = frozenset()

MARK_STYLE = "reverse"
"""How a marked request's id is drawn (the requests of the finding chosen with `f`)."""


def request_cell(request_id: str, marked: frozenset[str], style: str = "") -> Cell:
    """A request's id as a table draws it; reversed when it is marked."""
    if request_id in marked:
        return Text(shown_id(request_id), style=f"{style} {MARK_STYLE}".strip())
    return Text(shown_id(request_id), style=style) if style else shown_id(request_id)


def scheduled_rows(detail: StepDetail, marked: frozenset[str] = NO_MARKS) -> list[tuple[Cell, ...]]:
    """The SchedulerOutput's rows: request, kind, tokens, computed before→after, sampled, blocks."""
    return [
        (
            request_cell(r["request_id"], marked),
            r["kind"],
            str(r["num_tokens"]),
            f"{r['computed_before']}→{r['computed_after']}",
            _value(r["sampled_token_id"]),
            _group_blocks(r["new_block_ids_by_group"]) or _blocks(r["new_block_ids"]),
        )
        for r in detail.scheduled.dicts()
    ]


def allocation_rows(
    detail: StepDetail, marked: frozenset[str] = NO_MARKS
) -> list[tuple[Cell, ...]]:
    """Every `allocate_slots` call: its tokens, blocks needed, free blocks, grant or refusal."""
    return [
        (
            request_cell(a["request_id"], marked),
            a["pass"],
            str(a["num_new_tokens"]),
            str(a["num_new_computed_tokens"] or ""),
            str(a["num_blocks_needed"]),
            f"{_value(a['num_free_blocks_before'])}→{_value(a['num_free_blocks_after'])}",
            Text("✓ " + _blocks(a["block_ids"]), style="green")
            if a["granted"]
            else Text(f"✗ {a['refusal']}", style="bold red"),
        )
        for a in detail.allocations.dicts()
    ]


def preemption_rows(
    detail: StepDetail, marked: frozenset[str] = NO_MARKS
) -> list[tuple[Cell, ...]]:
    """Every preemption: victim, who needed the room, tokens discarded, blocks freed, refund."""
    return [
        (
            request_cell(p["request_id"], marked, "bold red"),
            request_cell(p["needed_by"], marked),
            str(p["num_computed_tokens_discarded"]),
            str(p["num_blocks_freed"]),
            str(p["num_tokens_refunded"] or ""),
        )
        for p in detail.preemptions.dicts()
    ]


def draft_rows(detail: StepDetail) -> list[tuple[Cell, ...]]:
    """Each request's drafts marked ✓ accepted / ✗ rejected, what it appended, what comes next."""
    return [
        (
            shown_id(d["request_id"]),
            marked_drafts(d["scheduled_draft_token_ids"] or [], d["num_accepted"]),
            ""
            if d["num_accepted"] is None
            else f"{d['num_accepted']}/{len(d['scheduled_draft_token_ids'])}",
            _tokens(d["sampled_token_ids"]),
            _tokens(d["proposed_draft_token_ids"]),
        )
        for d in detail.drafts.dicts()
    ]


def marked_drafts(drafts: list[int], num_accepted: int | None) -> Text:
    """`221✓ 743✓ 353✗`; -1 reads `pad`; unmarked when the step's output was never verified."""
    text = Text()
    for position, token_id in enumerate(drafts):
        if position:
            text.append(" ")
        text.append(
            "pad" if token_id == -1 else str(token_id), style="dim" if token_id == -1 else ""
        )
        if num_accepted is None:
            continue
        if position < num_accepted:
            text.append("✓", style="green")
        else:
            text.append("✗", style="bold red")
    return text


def _tokens(token_ids: list[int] | None) -> str:
    return "" if token_ids is None else " ".join(map(str, token_ids))
