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
from .request_rows import request_row
from .segments import SegmentSettings, SegmentWriter
from .spec_rows import add_spec_decode
from .step_rows import IndexCache, Seq, add_explicit_calls, add_scheduled, number_decisions
from .step_summary_row import engine_step_row, idle_step_row
from .writer import CHECKPOINTS, REQUEST_ABORTS, REQUEST_GRAMMARS, TraceWriter

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
        self.specs: dict[int, RequestSpec] = dict(enumerate(workload.requests))
        """Each request's spec until its `_requests` row is recorded: a live engine's
        recording would otherwise hold every prompt it was sent."""
        self.request_index = {spec.request_id: i for i, spec in enumerate(workload.requests)}
        self._num_indexed = len(workload.requests)
        self._carried_rows: dict[int, dict[str, object]] = {}
        """Segmented: the `_requests` row of each unfinished request, which every segment
        it runs in holds, so each segment replays on its own."""
        self._finished_rows: dict[int, dict[str, object]] = {}
        """Segmented: the rows of requests finished since the last segment opened (its
        checkpoint may still name them: finished, not yet shipped as finished)."""
        self._opening: _Opening | None = None
        """Where the next segment opens (or recording resumes after a gap), held until that
        step is recorded."""
        self._segment_open = False
        self._in_gap = False
        """Steps are being dropped: nothing is recorded until a checkpoint resumes it."""
        self._row_aborts: dict[int, tuple[int, bool]] = {}
        """The abort (step, before update) in a recorded `_requests` row, by request index."""
        self.flush_every_steps = flush_every_steps
        self.flush_interval_s = flush_interval_s
        self.flush_rows = flush_rows
        self.decisions: list[Decision] = []
        self._schedule_start: ScheduleStart | None = None
        self._schedule_calls: deque[ScheduleCall] = deque()
        self._steps_since_flush = 0
        self._last_flush = time.monotonic()
        self.num_steps = 0
        self._buffers = _new_buffers()
        self._scheduled = self._buffers["_scheduled"]
        self._checkpoints: list[PendingCheckpoint] = []
        """Checkpoints taken since the last flush (their rows are built by the writer)."""
        self._aborts: list[tuple[int, int, bool]] = []
        """(request_index, abort_step, abort_before_update) not in `_requests` rows yet."""
        self._grammars: list[tuple[int, int]] = []
        """(request_index, grammar_ready_step) not in `_requests` rows yet."""
        self._compiling: dict[int, int | None] = {}
        """Requests whose grammar a live engine is still compiling, each with the step its
        written row says it is ready at so far (None: not said yet); see `grammar_pending`."""
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
        """Record `spec` for its request: a known id whose row is still to be recorded keeps
        its index (a planned request arriving); any other gets the next."""
        index = self.request_index.get(spec.request_id)
        if index is None or index not in self.specs:
            index = self.request_index[spec.request_id] = self._num_indexed
            self._num_indexed += 1
        self.specs[index] = spec

    def grammar_pending(self, request_id: str) -> None:
        """The request waits for its grammar, which a live engine compiles: until it is
        ready, each flush says it is ready at the step after the last one recorded, so a
        reader (of a recording being written, a snapshot of it, what a kill left) holds it
        through every step it can see, as the engine did."""
        index = self.request_index.get(request_id)
        if index is not None:
            self._compiling[index] = None

    def grammar_ready(self, request_id: str, step: int) -> None:
        """The request's grammar became ready at `step` (a live engine learns it late).

        A row already written is updated when the step is flushed (a segment's files are
        not: its `request_grammars` rows say the step, and the rows it carries into later
        segments hold it).
        """
        index = self.request_index.get(request_id)
        if index is None:
            return
        self._compiling.pop(index, None)
        spec = self.specs.get(index)
        if spec is not None:
            self.specs[index] = dataclasses.replace(spec, grammar_ready_step=step)
            return
        self._update_grammar_ready(index, step)

    def _update_grammar_ready(self, index: int, step: int) -> None:
        """Say so of the request's written row (and of the row a later segment carries)."""
        if self.segmented:
            ready = {"grammar_ready_step": step}
            for rows in (self._carried_rows, self._finished_rows):
                row = rows.get(index)
                if row is not None:
                    rows[index] = {**row, **ready}
        self._grammars.append((index, step))

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
        num_aborts = len(self._aborts)
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
            del self._aborts[num_aborts:]
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
            self._record_request(rc.request_id)
            self._table_lengths[self.request_index[rc.request_id]] = len(rc.block_ids)

    def record_checkpoint(
        self, checkpoint: SchedulerCheckpoint, take_ns: int, *, opens_segment: bool = False
    ) -> None:
        """Record the state at the start of a step; it is written with the steps buffered.

        One that `opens_segment` starts a new segment at its step (or, after a gap, resumes
        recording there): it is held until that step is recorded.
        """
        pending = PendingCheckpoint.of(checkpoint, self.request_index, take_ns)
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
        the rows a run from its checkpoint needs (its requests') go first."""
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
            self._carry_rows()
        else:
            self._carry_requests(pending, after_gap=self._in_gap)
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

    def _carry_requests(self, pending: PendingCheckpoint, *, after_gap: bool) -> None:
        """The `_requests` rows of every request the checkpoint names: new ones for those
        that arrived in a gap, again for the rest when a segment opens; from here on only
        the unfinished ones are kept (the rest finished before the checkpoint)."""
        requests = self._buffers["_requests"]
        for request_id, index in sorted(pending.request_index.items(), key=lambda item: item[1]):
            if index in self.specs:
                self._record_request(request_id)
            elif self.segmented:
                requests.append_row(self._carried_rows.get(index) or self._finished_rows[index])
        for rc in pending.checkpoint.requests:
            self._table_lengths[self.request_index[rc.request_id]] = len(rc.block_ids)
        if self.segmented:
            # Under async scheduling a checkpoint is taken before the previous step's update,
            # which the recorder has seen by now: a request it names as unfinished may have
            # finished there, and is carried no further.
            unfinished = (self.request_index[rc.request_id] for rc in pending.checkpoint.requests)
            self._carried_rows = {
                index: self._carried_rows[index]
                for index in unfinished
                if index in self._carried_rows
            }
            self._finished_rows = {}
            self._row_aborts = {
                index: abort
                for index, abort in self._row_aborts.items()
                if index in self._carried_rows
            }
            self._forget_finished_ids(pending)
        if after_gap:
            self._forget_arrived_before(pending.checkpoint)

    def _forget_finished_ids(self, pending: PendingCheckpoint) -> None:
        """Keep the ids of requests still to come, unfinished, or named by the checkpoint
        (finished, not yet shipped): a server's recording would otherwise hold every id it
        was sent."""
        named = set(pending.request_index)
        self.request_index = {
            request_id: index
            for request_id, index in self.request_index.items()
            if index in self.specs or index in self._carried_rows or request_id in named
        }

    def _carry_rows(self) -> None:
        """With no checkpoint: the rows of every request not known to have finished."""
        for row in self._carried_rows.values():
            self._buffers["_requests"].append_row(row)
        self._finished_rows = {}

    def _finished(self, index: int) -> None:
        """The request at `index` has finished: its row is kept only until a segment opens."""
        row = self._carried_rows.pop(index, None)
        if row is not None:
            self._finished_rows[index] = row

    def _forget_arrived_before(self, checkpoint: SchedulerCheckpoint) -> None:
        """Drop the specs of requests that arrived and finished in a gap (never recorded)."""
        unfinished = {self.request_index[rc.request_id] for rc in checkpoint.requests}
        for index, spec in list(self.specs.items()):
            if spec.arrival_step < checkpoint.step and index not in unfinished:
                del self.specs[index]

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
            if self._aborts:
                batch[REQUEST_ABORTS] = _aborts_table(self._aborts)
                self._aborts = []
            self._hold_compiling()
            if self._grammars:
                batch[REQUEST_GRAMMARS] = _grammars_table(self._grammars)
                self._grammars = []
            if self._checkpoints:
                batch[CHECKPOINTS] = self._checkpoints
                self._checkpoints = []
            if batch:
                self.writer.submit(batch)
        self._steps_since_flush = 0
        self._last_flush = time.monotonic()

    def _hold_compiling(self) -> None:
        """Each written row of a request still compiling its grammar: ready, so far, at the
        step after the last one recorded."""
        if self._last_step is None:
            return
        held_until = self._last_step + 1
        for index, said in self._compiling.items():
            if said != held_until and index not in self.specs:
                self._compiling[index] = held_until
                self._update_grammar_ready(index, held_until)

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
            self._record_request(request_id)
            self._event(record.step, seq, request_id, "arrive", None)
        for request_id in record.rejected:
            self._record_request(request_id)
            self._finished(self.request_index[request_id])
            self._event(record.step, seq, request_id, "reject", "prompt length")
        for request_id in record.aborted:
            self._event(record.step, seq, request_id, "abort", None)
            self._record_abort(request_id, record.step, before_update=False)

    def _record_late_aborts(self, record: StepRecord, seq: Seq) -> None:
        for request_id in record.aborted_before_update:
            self._event(record.step, seq, request_id, "abort", "before_update")
            self._record_abort(request_id, record.step, before_update=True)

    def _record_abort(self, request_id: str, step: int, *, before_update: bool) -> None:
        """Put the abort in the request's row too: replay reads a request's inputs there.

        A scripted workload names its aborts up front; a live engine learns them
        after the row was written, so the row is updated when the step is flushed.
        """
        index = self.request_index[request_id]
        self._table_lengths.pop(index, None)
        self._group_lengths.forget(index)
        self._finished(index)
        spec = self.specs.get(index)
        if spec is None:  # its row is recorded
            if self._row_aborts.get(index) == (step, before_update):
                return
            self._row_aborts[index] = (step, before_update)
            row = self._finished_rows.get(index)
            if row is not None:  # a segment that opens next may carry it again
                aborted = {"abort_step": step, "abort_before_update": before_update}
                self._finished_rows[index] = {**row, **aborted}
        elif spec.abort_step == step and spec.abort_before_update == before_update:
            return
        else:
            self.specs[index] = dataclasses.replace(
                spec, abort_step=step, abort_before_update=before_update
            )
        self._aborts.append((index, step, before_update))

    def _record_request(self, request_id: str) -> None:
        """The request's `_requests` row; from then on only an abort in it is kept."""
        index = self.request_index[request_id]
        spec = self.specs.pop(index, None)
        assert spec is not None, f"request {request_id}: its row is recorded already"
        row = request_row(index, request_id, spec, self.redactor)
        self._buffers["_requests"].append_row(row)
        if self.segmented:
            self._carried_rows[index] = row
        if spec.abort_step is not None:
            self._row_aborts[index] = (spec.abort_step, spec.abort_before_update)

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
        columns["request_index"].append(self.request_index[request_id])
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
            numbered, self.request_index, self.redactor, self._table_lengths, self._indices,
            self._group_lengths,
        )  # fmt: skip
        refunds = {p.request_id: p for _, p in numbered.preemptions if p.num_tokens_refunded}
        add_explicit_calls(
            buffers["_allocations"], step, numbered.explicit_calls, refunds, self.request_index,
            self.workload.config.num_lookahead_tokens,
        )  # fmt: skip
        for number, preemption in numbered.preemptions:
            self._record_preemption(step, number, preemption)
            self._event(step, seq, preemption.request_id, "preempt", preemption.needed_by)
        for number, skip in numbered.skips:
            self._event(step, number, skip.request_id, "skip", str(skip.reason))
        self._record_admission_events(step, engine_step, seq)
        if self.workload.config.num_speculative_tokens:
            add_spec_decode(buffers, step, engine_step, self.request_index, self.redactor)
        self._record_late_aborts(record, seq)
        finished = [o for o in engine_step.outputs if o[_FINISH_REASON] is not None]
        for output in finished:
            stop = self._stop_reason(output.stop_reason)
            self._event(step, seq, output.request_id, "finish", str(output.finish_reason), stop)
            index = self.request_index[output.request_id]
            self._table_lengths.pop(index, None)
            self._group_lengths.forget(index)
            self._finished(index)
        blocked = end.blocked_request_id
        row = engine_step_row(step, engine_step, scheduler, start, end, ended_at_ns)
        row.update(
            blocked_request_index=None if blocked is None else self.request_index[blocked],
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
                "request_index": self.request_index[preemption.request_id],
                "needed_by_index": self.request_index[preemption.needed_by],
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


def _grammars_table(grammars: list[tuple[int, int]]) -> pa.Table:
    indices, steps = zip(*grammars, strict=True)
    return pa.table(
        {
            "request_index": pa.array(indices, pa.int32()),
            "grammar_ready_step": pa.array(steps, pa.int32()),
        }
    )


def _aborts_table(aborts: list[tuple[int, int, bool]]) -> pa.Table:
    indices, steps, before_update = zip(*aborts, strict=True)
    return pa.table(
        {
            "request_index": pa.array(indices, pa.int32()),
            "abort_step": pa.array(steps, pa.int32()),
            "abort_before_update": pa.array(before_update, pa.bool_()),
        }
    )


def _new_buffers() -> dict[str, TableBuffer]:
    """One buffer per table recorded row by row, columns in `tables.sql` order (a
    checkpoint's tables are built whole: `checkpoint_rows.py`)."""
    enums = enum_types()
    return {
        spec.name: buffer_for(spec, enums)
        for spec in table_specs()
        if spec.name not in ("_meta", "_config") and not spec.name.startswith("_checkpoint")
    }
