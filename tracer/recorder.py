"""Records every engine step into a trace: the probe the scheduler calls, plus each step's output.

Rows go into column buffers; they become one Arrow batch for the background writer
every `flush_rows` scheduled rows, `flush_every_steps` steps or `flush_interval_s`
seconds, whichever comes first. Batches of a DuckDB row group or more cost the
writer a fraction of the CPU per row that small ones do, so a busy engine flushes
by rows and a slow one by time. Wall time only paces flushes; it never touches a
decision.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
from stepscope.engine import EngineConfig, EngineCoreOutput, EngineStep, StepRecord, Workload
from stepscope.engine.checkpoint import SchedulerCheckpoint
from stepscope.engine.probe import (
    Decision,
    Preemption,
    QueueState,
    ScheduleCall,
    ScheduleEnd,
    ScheduleStart,
)
from stepscope.engine.workload import RequestSpec
from stepscope.schema.ddl import enum_types, table_specs

from .checkpoint_rows import PendingCheckpoint
from .columns import TableBuffer, buffer_for
from .group_block_rows import GroupTableLengths
from .held_signals import signals_held
from .redact import Redactor, redacted_config
from .request_ledger import RequestLedger
from .segments import SegmentSettings, SegmentWriter
from .spec_rows import add_spec_decode
from .step_rows import IndexCache, Seq, add_explicit_calls, add_scheduled, number_decisions
from .step_summary_row import engine_step_row, idle_step_row
from .writer import CHECKPOINTS, TraceWriter

FLUSH_ROWS = 131_072
"""`_scheduled` rows per batch at most: about one DuckDB row group (122,880 rows)."""
SEGMENT_FLUSH_INTERVAL_S = 1.0
"""A segmented recording hands its steps over at least this often: a reader of the open
segment sees the steps of up to about that long ago."""
_FINISH_REASON = EngineCoreOutput._fields.index("finish_reason")


class TraceRecorder:
    """The probe handed to the scheduler, and the sink for every `StepRecord`.

    The workload's requests get their indices up front; an engine whose requests
    are not known in advance (a live vLLM) registers each as it arrives. Each
    `schedule()` call's decisions wait in a queue until its step is recorded, since
    under async scheduling the next step is scheduled before this one's output.
    """

    def __init__(
        self,
        path: Path,
        workload: Workload,
        meta: Mapping[str, str],
        redactor: Redactor | None = None,
        flush_every_steps: int = 256,
        flush_interval_s: float = 5.0,
        flush_rows: int = FLUSH_ROWS,
        *,
        compact: bool = True,
        segments: SegmentSettings | None = None,
    ) -> None:
        meta = {**meta, "redacted": str(redactor is not None).lower()}
        if segments is not None:
            flush_interval_s = min(flush_interval_s, SEGMENT_FLUSH_INTERVAL_S)
        self._segment_writer = None if segments is None else SegmentWriter(path, meta, segments)
        self.writer: TraceWriter | SegmentWriter = (
            TraceWriter(path, meta, compact=compact)
            if self._segment_writer is None
            else self._segment_writer
        )
        self.segmented = segments is not None
        self.workload = workload
        self.redactor = redactor
        self._buffers = _new_buffers()
        self._scheduled = self._buffers["_scheduled"]
        self.requests = RequestLedger(
            workload, self._buffers["_requests"], redactor, segmented=self.segmented
        )
        self._opening: _Opening | None = None
        """Where the next segment opens (or recording resumes after a gap), held until that
        step is recorded."""
        self._segment_open = False
        self._in_gap = False
        """Steps are being dropped: nothing is recorded until a checkpoint resumes it."""
        self.flush_every_steps = flush_every_steps
        self.flush_interval_s = flush_interval_s
        self.flush_rows = flush_rows
        self.decisions: list[Decision] = []
        self._schedule_start: ScheduleStart | None = None
        self._schedule_calls: deque[ScheduleCall] = deque()
        self._steps_since_flush = 0
        self._last_flush = time.monotonic()
        self.num_steps = 0
        self._checkpoints: list[PendingCheckpoint] = []
        """Checkpoints taken since the last flush (their rows are built by the writer)."""
        self._last_step: int | None = None
        """The last step recorded (in the buffers or written)."""
        self._table_lengths: dict[int, int] = {}
        self._group_lengths = GroupTableLengths()
        self._seq = Seq()
        self._indices = IndexCache()
        config = workload.config if redactor is None else redacted_config(workload.config)
        self.writer.submit({"_config": _config_table(config)})

    # ----- the probe ----------------------------------------------------------

    def on_schedule_start(self, record: ScheduleStart) -> None:
        self._schedule_start = record

    def on_schedule_end(self, record: ScheduleEnd) -> None:
        assert self._schedule_start is not None, "on_schedule_start was not called"
        self._schedule_calls.append(ScheduleCall(self._schedule_start, self.decisions, record))
        self._schedule_start, self.decisions = None, []

    @property
    def next_decisions(self) -> list[Decision]:
        """The decisions of the oldest `schedule()` call whose step is not recorded yet."""
        return self._schedule_calls[0].decisions if self._schedule_calls else self.decisions

    def register_request(self, spec: RequestSpec) -> None:
        """A request a live engine was sent (`RequestLedger.register`)."""
        self.requests.register(spec)

    def grammar_pending(self, request_id: str) -> None:
        """The request waits for its grammar (`RequestLedger.grammar_pending`)."""
        self.requests.grammar_pending(request_id)

    def grammar_ready(self, request_id: str, step: int) -> None:
        """The request's grammar became ready at `step` (a live engine learns it late): a
        recorded row is updated when the step is flushed (`RequestLedger.grammar_ready`)."""
        self.requests.grammar_ready(request_id, step)

    # ----- steps --------------------------------------------------------------

    def record_step(
        self, record: StepRecord, scheduler: QueueState, ended_at_ns: int | None = None
    ) -> None:
        """Record one loop step; call it as the record is yielded (queues are read live).

        `ended_at_ns` is the wall clock the step ended at (None: now). A step is recorded
        whole or not at all: if recording it fails, its partial rows are dropped and every
        earlier step is kept.
        """
        ended_at_ns = time.time_ns() if ended_at_ns is None else ended_at_ns
        if self._opening is not None and record.step >= self._opening.step:
            self._open_segment(self._opening)
        if self._in_gap:
            return  # a step the engine handed over before it knew of the gap
        if self.segmented and not self._segment_open:
            self._start_writing_segment(record.step, starts_with_checkpoint=False)
        lengths = {name: buffer.num_rows for name, buffer in self._buffers.items()}
        num_aborts = self.requests.num_late_aborts
        try:
            seq = self._seq
            self._record_arrivals(record, seq)
            if record.engine_step is None:
                self._record_late_aborts(record, seq)
                self._record_idle_step(record.step, scheduler, ended_at_ns)
            else:
                self._record_engine_step(record, record.engine_step, scheduler, seq, ended_at_ns)
        except BaseException:
            for name, buffer in self._buffers.items():
                buffer.truncate(lengths[name])
            self.requests.drop_late_aborts_from(num_aborts)
            raise
        self.num_steps += 1
        self._last_step = record.step
        self._steps_since_flush += 1
        if (
            self._steps_since_flush >= self.flush_every_steps
            or self._scheduled.num_rows >= self.flush_rows
            or time.monotonic() - self._last_flush >= self.flush_interval_s
        ):
            self.flush()

    def record_resumed(self, checkpoint: SchedulerCheckpoint) -> None:
        """A run resumed at `checkpoint`: its unfinished requests' `_requests` rows (they
        arrived before the first step recorded), and their block tables' lengths."""
        for rc in checkpoint.requests:
            self.requests.record(rc.request_id)
        self._keep_table_lengths(checkpoint)

    def record_checkpoint(
        self, checkpoint: SchedulerCheckpoint, take_ns: int, *, opens_segment: bool = False
    ) -> None:
        """Record the state at the start of a step; it is written with the steps buffered.

        One that `opens_segment` starts a new segment at its step (or, after a gap, resumes
        recording there): it is held until that step is recorded.
        """
        pending = PendingCheckpoint.of(checkpoint, self.requests.index, take_ns)
        if opens_segment:
            self._opening = _Opening(checkpoint.step, pending)
        elif not self._in_gap:
            self._checkpoints.append(pending)

    def open_segment_at(self, step: int) -> None:
        """Start a new segment at `step` without a checkpoint (a redacted recording's: its
        segments do not replay on their own)."""
        self._opening = _Opening(step, None)

    def gap_starts(self, step: int) -> None:
        """Steps from `step` on are dropped until a checkpoint that opens a segment: what
        was recorded before it is kept, and its segment ends (`fell_behind`) when the next
        one opens or the recording closes."""
        self._in_gap = True
        self._schedule_calls.clear()
        self._schedule_start, self.decisions = None, []
        self._checkpoints = [c for c in self._checkpoints if c.checkpoint.step < step]
        self.flush()
        self.writer.set_meta({"dropped_steps_from": str(step)})

    def _open_segment(self, opening: _Opening) -> None:
        """A segment starts at `opening.step`: the steps before it are handed over, then
        the rows a run from its checkpoint needs (its requests') go first.

        Ctrl-C or a stop signal waits until the new segment is open with those rows: cut
        short, the recording would close with no segment open, its last meta unwritten, or
        with one that cannot replay on its own.
        """
        with signals_held():
            self._opening = None
            step, pending = opening.step, opening.checkpoint
            later = [c for c in self._checkpoints if c.checkpoint.step >= step]
            self._checkpoints = [c for c in self._checkpoints if c.checkpoint.step < step]
            self.flush()
            if self._segment_writer is not None:
                if self._segment_open:
                    self._segment_writer.end_segment(self._segment_ended_by)
                self._start_writing_segment(step, starts_with_checkpoint=pending is not None)
            if pending is None:
                self.requests.carry_unfinished()
            else:
                self.requests.carry(pending, after_gap=self._in_gap)
                self._keep_table_lengths(pending.checkpoint)
                later.insert(0, pending)
            self._in_gap = False
            self._checkpoints = later

    @property
    def _segment_ended_by(self) -> str:
        """Why the open segment ends: steps were dropped after it, or it was time for the next."""
        return "fell_behind" if self._in_gap else "rotated"

    def _start_writing_segment(self, step: int, *, starts_with_checkpoint: bool) -> None:
        assert self._segment_writer is not None
        self._segment_writer.open_segment(step, starts_with_checkpoint=starts_with_checkpoint)
        self._segment_open = True

    def _keep_table_lengths(self, checkpoint: SchedulerCheckpoint) -> None:
        """The block tables' lengths at `checkpoint` (a step's rows record what they add)."""
        index = self.requests.index
        for rc in checkpoint.requests:
            self._table_lengths[index[rc.request_id]] = len(rc.block_ids)

    def flush(self) -> None:
        """Hand the buffered rows to the writer as one batch (one transaction).

        Ctrl-C or a stop signal waits until the batch is handed over: rows taken out
        of the buffers and not handed over would be lost.
        """
        with signals_held():
            batch = {}
            for name, buffer in self._buffers.items():
                table = buffer.take_arrow()
                if table is not None:
                    batch[name] = table
            batch.update(self.requests.late_rows(self._last_step))
            if self._checkpoints:
                batch[CHECKPOINTS] = self._checkpoints
                self._checkpoints = []
            if batch:
                self.writer.submit(batch)
        self._steps_since_flush = 0
        self._last_flush = time.monotonic()

    def flush_if_stale(self) -> None:
        """Flush when steps have waited in the buffers `flush_interval_s` (an engine that has
        gone quiet still shows its last steps to the readers of a recording)."""
        if self._steps_since_flush and time.monotonic() - self._last_flush >= self.flush_interval_s:
            self.flush()

    wants_checkpoint = False
    """An inline recorder never drops steps, so never asks for a checkpoint to resume at."""

    def resume_at(self, step: int) -> None:
        """Never called: an inline recorder has no gap."""
        raise AssertionError(f"resume_at({step}) on a recorder that drops no steps")

    def mark(self, *, complete: bool, meta: Mapping[str, str] | None = None) -> None:
        """Commit every step recorded so far and say whether the trace is complete as it stands.

        A live engine that has gone idle is complete up to now: marked so (and the
        write-ahead log folded in), a server killed while idle leaves a whole trace.
        """
        self.flush()
        status = {**(meta or {}), "complete": str(complete).lower()}
        self.writer.set_meta({**status, "num_steps": str(self.num_steps)}, checkpoint=complete)

    def close(self, *, complete: bool, final_meta: Mapping[str, str] | None = None) -> None:
        """Flush, then mark the trace complete (or not), add `final_meta`, and close it.

        Ctrl-C or a stop signal waits until the file is closed: one closed half-way
        keeps its write-ahead log beside it.
        """
        with signals_held():
            try:
                self.flush()
            finally:
                final = {**(final_meta or {}), "num_steps": str(self.num_steps)}
                if self._segment_writer is None:
                    self.writer.close(complete=complete, final_meta=final)
                else:
                    ended_by = self._segment_ended_by if self._in_gap else "closed"
                    self._segment_writer.close(
                        complete=complete, final_meta=final, ended_by=ended_by
                    )

    def _record_arrivals(self, record: StepRecord, seq: Seq) -> None:
        for request_id in record.arrived:
            self.requests.record(request_id)
            self._event(record.step, seq, request_id, "arrive", None)
        for request_id in record.rejected:
            self.requests.record(request_id)
            self.requests.finished(self.requests.index[request_id])
            self._event(record.step, seq, request_id, "reject", "prompt length")
        for request_id in record.aborted:
            self._event(record.step, seq, request_id, "abort", None)
            self._record_abort(request_id, record.step, before_update=False)

    def _record_late_aborts(self, record: StepRecord, seq: Seq) -> None:
        for request_id in record.aborted_before_update:
            self._event(record.step, seq, request_id, "abort", "before_update")
            self._record_abort(request_id, record.step, before_update=True)

    def _record_abort(self, request_id: str, step: int, *, before_update: bool) -> None:
        """The request leaves; the abort goes into its row too (`RequestLedger.aborted`)."""
        index = self.requests.index[request_id]
        self._left(index)
        self.requests.aborted(index, step, before_update=before_update)

    def _left(self, index: int) -> None:
        """The request at `index` finished or was aborted: its tables are forgotten."""
        self._table_lengths.pop(index, None)
        self._group_lengths.forget(index)
        self.requests.finished(index)

    def _event(
        self,
        step: int,
        seq: Seq | int,
        request_id: str,
        kind: str,
        detail: str | None,
        stop_reason: int | None = None,
    ) -> None:
        """An event; `seq` is the step's counter, or a number already taken for it."""
        columns = self._buffers["_events"].columns
        columns["step"].append(step)
        columns["seq"].append(seq if isinstance(seq, int) else seq.next())
        columns["request_index"].append(self.requests.index[request_id])
        columns["kind"].append(kind)
        columns["detail"].append(detail)
        columns["stop_reason"].append(stop_reason)

    def _record_idle_step(self, step: int, scheduler: QueueState, ended_at_ns: int) -> None:
        columns = self._buffers["_steps"].columns
        self._append_step_row(idle_step_row(columns, step, scheduler, ended_at_ns))

    def _record_engine_step(
        self,
        record: StepRecord,
        engine_step: EngineStep,
        scheduler: QueueState,
        seq: Seq,
        ended_at_ns: int,
    ) -> None:
        assert self._schedule_calls, "the scheduler was not given this probe"
        call = self._schedule_calls.popleft()
        start, decisions, end = call.start, call.decisions, call.end
        step = record.step
        buffers = self._buffers
        numbered = number_decisions(engine_step, decisions, seq)
        add_scheduled(
            buffers["_scheduled"], buffers["_block_ids"], step, engine_step,
            numbered, self.requests.index, self.redactor, self._table_lengths, self._indices,
            self._group_lengths,
        )  # fmt: skip
        refunds = {p.request_id: p for _, p in numbered.preemptions if p.num_tokens_refunded}
        add_explicit_calls(
            buffers["_allocations"], step, numbered.explicit_calls, refunds, self.requests.index,
            self.workload.config.num_lookahead_tokens,
        )  # fmt: skip
        for number, preemption in numbered.preemptions:
            self._record_preemption(step, number, preemption)
            self._event(step, seq, preemption.request_id, "preempt", preemption.needed_by)
        for number, skip in numbered.skips:
            self._event(step, number, skip.request_id, "skip", str(skip.reason))
        self._record_admission_events(step, engine_step, seq)
        if self.workload.config.num_speculative_tokens:
            add_spec_decode(buffers, step, engine_step, self.requests.index, self.redactor)
        self._record_late_aborts(record, seq)
        finished = [o for o in engine_step.outputs if o[_FINISH_REASON] is not None]
        for output in finished:
            stop = self._stop_reason(output.stop_reason)
            self._event(step, seq, output.request_id, "finish", str(output.finish_reason), stop)
            self._left(self.requests.index[output.request_id])
        blocked = end.blocked_request_id
        row = engine_step_row(step, engine_step, scheduler, start, end, ended_at_ns)
        row.update(
            blocked_request_index=None if blocked is None else self.requests.index[blocked],
            update_step=record.update_step,
            num_preemptions=len(numbered.preemptions),
            num_finished=len(finished),
        )
        self._append_step_row(row)

    def _append_step_row(self, row: Mapping[str, object]) -> None:
        self._buffers["_steps"].append_row(row)

    def _record_preemption(self, step: int, seq: int, preemption: Preemption) -> None:
        self._buffers["_preemptions"].append_row(
            {
                "step": step,
                "seq": seq,
                "request_index": self.requests.index[preemption.request_id],
                "needed_by_index": self.requests.index[preemption.needed_by],
                "policy": preemption.policy,
                "num_computed_tokens_discarded": preemption.num_computed_tokens_discarded,
                "num_blocks_freed": preemption.num_blocks_freed,
                "num_tokens_refunded": preemption.num_tokens_refunded,
                "num_preemptions": preemption.num_preemptions,
                "num_free_blocks_before": preemption.num_free_blocks_before,
                "num_free_blocks_after": preemption.num_free_blocks_after,
            }
        )

    def _record_admission_events(self, step: int, engine_step: EngineStep, seq: Seq) -> None:
        output = engine_step.scheduler_output
        cached = output.scheduled_cached_reqs
        if not output.scheduled_new_reqs and not cached.resumed_req_ids:
            return
        num_running = len(cached.req_ids) - len(cached.resumed_req_ids)
        for req_id in itertools.islice(output.num_scheduled_tokens, num_running, None):
            kind = "resume" if req_id in cached.resumed_req_ids else "admit"
            self._event(step, seq, req_id, kind, None)

    def _stop_reason(self, stop_reason: int | str | None) -> int | None:
        if not isinstance(stop_reason, int):
            return None
        return stop_reason if self.redactor is None else self.redactor.token(stop_reason)


@dataclasses.dataclass(frozen=True)
class _Opening:
    """A segment to open at `step`, with the checkpoint it starts with (None: redacted)."""

    step: int
    checkpoint: PendingCheckpoint | None


def _config_table(config: EngineConfig) -> pa.Table:
    """The `_config` row: every knob, hybrid groups as typed structs (NULL: one full group)."""
    values = config.to_dict()
    values["prefix_cache_retention_interval"] = config.prefix_cache_retention_interval
    groups = values.pop("kv_cache_groups", None)
    columns = {name: [value] for name, value in values.items()}
    return pa.table({**columns, "kv_cache_groups": pa.array([groups], _KV_CACHE_GROUPS)})


_KV_CACHE_GROUPS = pa.list_(
    pa.struct(
        [
            ("type", pa.string()),
            ("sliding_window", pa.int32()),
            ("attention_chunk_size", pa.int32()),
        ]
    )
)
"""`_config.kv_cache_groups` (`tables.sql`)."""


def _new_buffers() -> dict[str, TableBuffer]:
    """One buffer per table recorded row by row, columns in `tables.sql` order (a
    checkpoint's tables are built whole: `checkpoint_rows.py`)."""
    enums = enum_types()
    return {
        spec.name: buffer_for(spec, enums)
        for spec in table_specs()
        if spec.name not in ("_meta", "_config") and not spec.name.startswith("_checkpoint")
    }
