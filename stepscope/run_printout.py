"""The per-step table `stepscope run` prints: what the scheduler decided, step by step."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from rich.console import Console

from stepscope.engine import EngineLoop, StepRecord, Workload, step_counts
from stepscope.engine.engine_loop import REJECTED
from stepscope.engine.scheduled_requests import RequestKind, scheduled_requests
from stepscope.engine.step_plan import AdmissionStop

from .safe_text import safe_text
from .streamed_table import Column, Piece, StepTable


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
        counts = step_counts(engine_step)
        self.num_scheduled_tokens += counts.num_scheduled_tokens
        free = counts.num_free_blocks_after_schedule
        self.min_free_blocks = (
            free if self.min_free_blocks is None else min(self.min_free_blocks, free)
        )


CAPTION = (
    "scheduled: request:tokens, +new admission, ^resumed after preemption; "
    "free: KV blocks free after schedule()"
)
ADMISSION_WIDTH = max(len(reason) for reason in AdmissionStop)
ADMISSION_LEAST = 10
"""In a narrow terminal the reason folds at `_` so `scheduled` keeps its least width."""
SCHEDULED_LEAST = 20
PIPE_WIDTH = 160
"""The table's width in a pipe without `COLUMNS`: wide enough that a log keeps rows whole."""


def run_console(*, stderr: bool = False) -> Console:
    """The console `stepscope run` prints to: the terminal's width, or PIPE_WIDTH in a pipe."""
    console = Console(stderr=stderr)
    if console.is_terminal or os.environ.get("COLUMNS"):
        return console
    return Console(stderr=stderr, width=PIPE_WIDTH)


def new_step_table(console: Console, workload: Workload) -> StepTable:
    """The columns of `stepscope run`, wide enough for any value `workload` can produce."""
    config = workload.config
    budget = config.token_budget
    return StepTable(
        console,
        [
            Column("step", len(str(workload.max_steps)), right=True, style="cyan"),
            Column("scheduled", 0, share=3, min_width=SCHEDULED_LEAST),
            Column("tokens", len(f"{budget}/{budget}"), right=True),
            Column("preempted", 0, share=1, style="red"),
            Column("finished", 0, share=1, style="green"),
            Column("free", len(str(config.num_blocks)), right=True),
            Column("run/wait", len(f"{config.max_num_seqs}/{len(workload.requests)}"), right=True),
            Column("admission", ADMISSION_WIDTH, style="dim", min_width=ADMISSION_LEAST),
        ],
    )


_KIND_MARKS = {
    RequestKind.NEW: ("+", "bold green"),
    RequestKind.RESUMED: ("^", "bold yellow"),
    RequestKind.RUNNING: ("", ""),
}


def step_cells(record: StepRecord, loop: EngineLoop, token_budget: int) -> list[list[Piece]]:
    """The row of one step; request ids are printed with unprintable characters escaped."""
    engine_step = record.engine_step
    if engine_step is None:
        return [[(str(record.step), "")], [("idle", "dim")], *[[] for _ in range(6)]]
    output = engine_step.scheduler_output
    requests = scheduled_requests(output)
    scheduled = [
        (f"{_KIND_MARKS[kind][0]}{safe_text(req_id)}:{num_tokens}", _KIND_MARKS[kind][1])
        for req_id, num_tokens, kind in zip(
            requests.req_ids, requests.num_scheduled_tokens, requests.kinds, strict=True
        )
    ]
    preempted = sorted(output.preempted_req_ids, key=loop.request_index.__getitem__)
    finished = [
        (f"{safe_text(o.request_id)} {o.finish_reason}", "")
        for o in engine_step.outputs
        if o.finish_reason
    ]
    running, waiting = loop.core.scheduler.get_request_counts()
    end, counts = engine_step.schedule_end, step_counts(engine_step)
    return [
        [(str(record.step), "")],
        scheduled,
        [(f"{counts.num_scheduled_tokens}/{token_budget}", "")],
        [(safe_text(req_id), "") for req_id in preempted],
        finished,
        [(str(counts.num_free_blocks_after_schedule), "")],
        [(f"{running}/{waiting}", "")],
        [] if end is None else [(str(end.admission_stop), "")],
    ]


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
