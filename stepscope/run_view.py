"""The per-step table `stepscope run` prints: what the scheduler decided, step by step."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stepscope.engine import EngineLoop, StepRecord
from stepscope.engine.engine_loop import REJECTED
from stepscope.engine.scheduled_requests import RequestKind, scheduled_requests


@dataclass
class RunSummary:
    num_steps: int = 0
    num_idle_steps: int = 0
    num_scheduled_tokens: int = 0
    min_free_blocks: int | None = None

    def add(self, record: StepRecord) -> None:
        self.num_steps += 1
        engine_step = record.engine_step
        if engine_step is None:
            self.num_idle_steps += 1
            return
        output = engine_step.scheduler_output
        self.num_scheduled_tokens += output.total_num_scheduled_tokens
        free = engine_step.num_free_blocks_after_schedule
        self.min_free_blocks = (
            free if self.min_free_blocks is None else min(self.min_free_blocks, free)
        )


def new_step_table() -> Table:
    table = Table(
        header_style="bold",
        caption="scheduled: request:tokens, +new admission, ^resumed after preemption; "
        "free: KV blocks free after schedule()",
        caption_justify="left",
        pad_edge=False,
    )
    table.add_column("step", justify="right", style="cyan", no_wrap=True)
    table.add_column("scheduled", overflow="fold", ratio=3)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("preempted", style="red", overflow="fold", ratio=1)
    table.add_column("finished", style="green", overflow="fold", ratio=1)
    table.add_column("free", justify="right", no_wrap=True)
    table.add_column("run/wait", justify="right", no_wrap=True)
    table.add_column("admission", style="dim", no_wrap=True)
    return table


_KIND_MARKS = {
    RequestKind.NEW: ("+", "bold green"),
    RequestKind.RESUMED: ("^", "bold yellow"),
    RequestKind.RUNNING: ("", ""),
}


def add_step_row(table: Table, record: StepRecord, loop: EngineLoop, token_budget: int) -> None:
    engine_step = record.engine_step
    if engine_step is None:
        table.add_row(str(record.step), Text("idle", style="dim"), *[""] * 6)
        return
    output = engine_step.scheduler_output
    requests = scheduled_requests(output)
    scheduled = Text()
    for req_id, num_tokens, kind in zip(
        requests.req_ids, requests.num_scheduled_tokens, requests.kinds, strict=True
    ):
        marker, style = _KIND_MARKS[kind]
        scheduled.append(f"{marker}{req_id}:{num_tokens} ", style=style)
    finished = " ".join(
        f"{o.request_id} {o.finish_reason}" for o in engine_step.outputs if o.finish_reason
    )
    running, waiting = loop.core.scheduler.get_request_counts()
    table.add_row(
        str(record.step),
        scheduled,
        f"{output.total_num_scheduled_tokens}/{token_budget}",
        " ".join(sorted(output.preempted_req_ids, key=loop.request_index.__getitem__)),
        finished,
        str(engine_step.num_free_blocks_after_schedule),
        f"{running}/{waiting}",
        "" if engine_step.schedule_end is None else str(engine_step.schedule_end.admission_stop),
    )


def print_summary(console: Console, summary: RunSummary, loop: EngineLoop) -> None:
    final = loop.final()
    reasons = Counter(
        "unfinished" if f.finish_reason is None else str(f.finish_reason) for f in final.values()
    )
    preemptions = sum(f.num_preemptions for f in final.values())
    rejected = reasons.pop(REJECTED, 0)
    parts = [
        f"{summary.num_steps} steps ({summary.num_idle_steps} idle)",
        f"{len(final)} requests: " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())),
        f"{preemptions} preemptions",
        f"{summary.num_scheduled_tokens} tokens scheduled",
    ]
    if rejected:
        parts.append(f"{rejected} rejected")
    if summary.min_free_blocks is not None:
        parts.append(f"fewest free blocks {summary.min_free_blocks}")
    console.print("  ".join(parts))
