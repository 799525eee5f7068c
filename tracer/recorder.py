"""Records every engine step into a trace: the probe the scheduler calls, plus each step's output.

Rows go into column buffers; every `flush_every_steps` steps or `flush_interval_s`
seconds (whichever comes first) they become one Arrow batch for the background
writer. Wall time only paces flushes; it never touches a decision.
"""

from __future__ import annotations

import itertools
import time
from array import array
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
from stepscope.engine import EngineConfig, EngineStep, Scheduler, StepRecord, Workload
from stepscope.engine.kv_cache_manager import AllocationRefusal
from stepscope.schema.ddl import enum_types, table_specs

from .columns import EnumColumn, IntColumn, ListColumn, ObjectColumn, TableBuffer, buffer_for
from .probe import AllocationCall, Decision, Preemption, ScheduleEnd, ScheduleStart
from .redact import Redactor
from .writer import TraceWriter


class TraceRecorder:
    """The probe handed to the scheduler, and the sink for every `StepRecord`."""

    def __init__(
        self,
        path: Path,
        workload: Workload,
        meta: Mapping[str, str],
        redactor: Redactor | None = None,
        flush_every_steps: int = 256,
        flush_interval_s: float = 0.5,
    ) -> None:
        self.writer = TraceWriter(path, {**meta, "redacted": str(redactor is not None).lower()})
        self.workload = workload
        self.redactor = redactor
        self.request_index = {spec.request_id: i for i, spec in enumerate(workload.requests)}
        self.flush_every_steps = flush_every_steps
        self.flush_interval_s = flush_interval_s
        self.decisions: list[Decision] = []
        self._schedule_start: ScheduleStart | None = None
        self._schedule_end: ScheduleEnd | None = None
        self._steps_since_flush = 0
        self._last_flush = time.monotonic()
        self.num_steps = 0
        self._buffers = _new_buffers()
        self.writer.submit({"_config": _config_table(workload.config)})

    # ----- the probe ----------------------------------------------------------

    def on_schedule_start(self, record: ScheduleStart) -> None:
        self._schedule_start = record

    def on_schedule_end(self, record: ScheduleEnd) -> None:
        self._schedule_end = record

    # ----- steps --------------------------------------------------------------

    def record_step(self, record: StepRecord, scheduler: Scheduler) -> None:
        """Record one loop step; call it as the record is yielded (queues are read live).

        A step is recorded whole or not at all: if recording it fails, its partial
        rows are dropped and every earlier step is kept.
        """
        lengths = {name: len(buffer) for name, buffer in self._buffers.items()}
        try:
            seq = itertools.count()
            self._record_arrivals(record, seq)
            if record.engine_step is None:
                self._record_idle_step(record.step, scheduler)
            else:
                self._record_engine_step(record.step, record.engine_step, scheduler, seq)
        except BaseException:
            for name, buffer in self._buffers.items():
                buffer.truncate(lengths[name])
            raise
        self.num_steps += 1
        self._steps_since_flush += 1
        if (
            self._steps_since_flush >= self.flush_every_steps
            or time.monotonic() - self._last_flush >= self.flush_interval_s
        ):
            self.flush()

    def flush(self) -> None:
        """Hand the buffered rows to the writer as one batch (one transaction)."""
        batch = {}
        for name, buffer in self._buffers.items():
            table = buffer.take_arrow()
            if table is not None:
                batch[name] = table
        if batch:
            self.writer.submit(batch)
        self._steps_since_flush = 0
        self._last_flush = time.monotonic()

    def close(self, complete: bool) -> None:
        """Flush, then mark the trace complete (or not) and close it."""
        try:
            self.flush()
        finally:
            self.writer.close(complete, {"num_steps": str(self.num_steps)})

    def _record_arrivals(self, record: StepRecord, seq: Iterator[int]) -> None:
        for request_id in record.arrived:
            self._record_request(request_id)
            self._event(record.step, seq, request_id, "arrive", None)
        for request_id in record.rejected:
            self._record_request(request_id)
            self._event(record.step, seq, request_id, "reject", "prompt length")
        for request_id in record.aborted:
            self._event(record.step, seq, request_id, "abort", None)

    def _record_request(self, request_id: str) -> None:
        index = self.request_index[request_id]
        spec = self.workload.requests[index]
        params = spec.sampling_params
        prompt = list(spec.prompt_token_ids)
        eos, stops = params.eos_token_id, list(params.stop_token_ids)
        if self.redactor is not None:
            prompt = self.redactor.tokens(prompt)
            eos = None if eos is None else self.redactor.token(eos)
            stops = self.redactor.tokens(stops)
        row = (
            index,
            request_id,
            spec.arrival_step,
            spec.arrival_time,
            spec.priority,
            len(prompt),
            prompt,
            params.max_tokens,
            params.min_tokens,
            eos,
            stops,
            spec.abort_step,
        )
        for column, value in zip(self._buffers["_requests"].columns.values(), row, strict=True):
            _obj(column).values.append(value)

    def _event(
        self, step: int, seq: Iterator[int], request_id: str, kind: str, detail: str | None
    ) -> None:
        columns = self._buffers["_events"].columns
        _int(columns["step"]).append(step)
        _int(columns["seq"]).append(next(seq))
        _int(columns["request_index"]).append(self.request_index[request_id])
        _enum(columns["kind"]).append(kind)
        _obj(columns["detail"]).values.append(detail)

    def _record_idle_step(self, step: int, scheduler: Scheduler) -> None:
        num_running, num_waiting = scheduler.get_request_counts()
        free = scheduler.kv_cache_manager.get_num_free_blocks()
        row: dict[str, object] = dict.fromkeys(self._buffers["_steps"].columns)
        row.update(
            step=step,
            idle=True,
            num_free_blocks_before=free,
            num_free_blocks_after_update=free,
            num_running_after=num_running,
            num_waiting_after=num_waiting,
        )
        self._append_step_row(row)

    def _record_engine_step(
        self, step: int, engine_step: EngineStep, scheduler: Scheduler, seq: Iterator[int]
    ) -> None:
        decisions, self.decisions = self.decisions, []
        start, end = self._schedule_start, self._schedule_end
        assert start is not None and end is not None, "the scheduler was not given this probe"
        self._record_scheduled(step, engine_step)
        num_preemptions = self._record_decisions(step, decisions, seq)
        self._record_admissions(step, engine_step, seq)
        num_finished = self._record_outputs(step, engine_step, seq)
        output = engine_step.scheduler_output
        num_running, num_waiting = scheduler.get_request_counts()
        row = {
            "step": step,
            "idle": False,
            "token_budget": start.token_budget,
            "input_budget": start.input_budget,
            "long_prefill_token_threshold": start.long_prefill_token_threshold,
            "num_running_before": start.num_running,
            "num_waiting_before": start.num_waiting,
            "num_free_blocks_before": start.num_free_blocks,
            "num_scheduled_tokens": output.total_num_scheduled_tokens,
            "num_scheduled_reqs": len(output.num_scheduled_tokens),
            "num_new_reqs": len(output.scheduled_new_reqs),
            "num_resumed_reqs": len(output.scheduled_cached_reqs.resumed_req_ids),
            "num_preemptions": num_preemptions,
            "num_finished": num_finished,
            "num_free_blocks_after_schedule": engine_step.num_free_blocks_after_schedule,
            "num_free_blocks_after_update": scheduler.kv_cache_manager.get_num_free_blocks(),
            "num_running_after": num_running,
            "num_waiting_after": num_waiting,
            "prefix_cache_queries": end.prefix_cache_queries,
            "prefix_cache_hits": end.prefix_cache_hits,
            "running_pass_end": str(end.running_pass_end),
            "admission_stop": str(end.admission_stop),
            "blocked_request_index": (
                None
                if end.blocked_request_id is None
                else self.request_index[end.blocked_request_id]
            ),
            "schedule_ns": engine_step.schedule_ns,
            "model_ns": engine_step.model_ns,
            "update_ns": engine_step.update_ns,
        }
        self._append_step_row(row)

    def _append_step_row(self, row: Mapping[str, object]) -> None:
        for name, column in self._buffers["_steps"].columns.items():
            _obj(column).values.append(row[name])

    def _record_scheduled(self, step: int, engine_step: EngineStep) -> None:
        """One row per scheduled request, in `num_scheduled_tokens` order."""
        output = engine_step.scheduler_output
        cached = output.scheduled_cached_reqs
        num_scheduled = output.num_scheduled_tokens
        num_rows = len(num_scheduled)
        num_running = len(cached.req_ids) - len(cached.resumed_req_ids)
        admissions = _admission_rows(engine_step)
        columns = self._buffers["_scheduled"].columns
        _int(columns["step"]).values.extend(array("i", [step]) * num_rows)
        _int(columns["position"]).values.extend(range(num_rows))
        _int(columns["request_index"]).values.extend(
            map(self.request_index.__getitem__, num_scheduled)
        )
        kinds = _enum(columns["kind"])
        kinds.extend_repeated("running", num_running)
        _int(columns["num_tokens"]).values.extend(num_scheduled.values())
        computed = _int(columns["computed_before"]).values
        computed.extend(cached.num_computed_tokens[:num_running])
        outputs_before = _int(columns["num_output_tokens"]).values
        outputs_before.extend(cached.num_output_tokens[:num_running])
        block_ids = _list(columns["new_block_ids"])
        block_ids.extend(cached.new_block_ids[:num_running])
        for kind, num_computed, num_outputs, blocks in admissions:
            kinds.append(kind)
            computed.append(num_computed)
            outputs_before.append(num_outputs)
            block_ids.append(blocks)
        runner_output = engine_step.model_runner_output
        sampled, index_of = runner_output.sampled_token_ids, runner_output.req_id_to_index
        _int(columns["is_prefill_chunk"]).values.extend(
            not sampled[index_of[req_id]] for req_id in num_scheduled
        )

    def _record_decisions(self, step: int, decisions: list[Decision], seq: Iterator[int]) -> int:
        """Allocation calls and preemptions, numbered in call order; returns the preemptions."""
        allocations: list[AllocationCall] = [d for d in decisions if type(d) is tuple]
        seqs = [next(seq) for _ in decisions]
        if len(allocations) == len(decisions):
            self._record_allocations(step, allocations, seqs)
            return 0
        allocation_seqs = [s for s, d in zip(seqs, decisions, strict=True) if type(d) is tuple]
        self._record_allocations(step, allocations, allocation_seqs)
        preemptions = 0
        for number, decision in zip(seqs, decisions, strict=True):
            if isinstance(decision, Preemption):
                self._record_preemption(step, number, decision)
                self._event(step, seq, decision.request_id, "preempt", decision.needed_by)
                preemptions += 1
        return preemptions

    def _record_allocations(
        self, step: int, calls: Sequence[AllocationCall], seqs: list[int]
    ) -> None:
        if not calls:
            return
        (ids, passes, num_tokens, num_hits, full, watermark, free_before, free_after, results) = (
            zip(*calls, strict=True)
        )
        columns = self._buffers["_allocations"].columns
        _int(columns["step"]).values.extend(array("i", [step]) * len(calls))
        _int(columns["seq"]).values.extend(seqs)
        _int(columns["request_index"]).values.extend(map(self.request_index.__getitem__, ids))
        pass_column = _enum(columns["pass"])
        pass_column.values.extend(map(pass_column.code.__getitem__, passes))
        _int(columns["num_new_tokens"]).values.extend(num_tokens)
        _int(columns["num_new_computed_tokens"]).values.extend(num_hits)
        _int(columns["num_lookahead_tokens"]).values.extend(array("i", [0]) * len(calls))
        _int(columns["full_sequence_check"]).values.extend(full)
        needed = [
            r.num_blocks_needed if type(r) is AllocationRefusal else before - after
            for r, before, after in zip(results, free_before, free_after, strict=True)
        ]
        _int(columns["num_blocks_needed"]).values.extend(needed)
        _int(columns["watermark_blocks"]).values.extend(watermark)
        _int(columns["num_free_blocks_before"]).values.extend(free_before)
        _int(columns["num_free_blocks_after"]).values.extend(free_after)
        refused = [type(r) is AllocationRefusal for r in results]
        _int(columns["granted"]).values.extend(not r for r in refused)
        _obj(columns["refusal"]).values.extend(
            r.check.value if type(r) is AllocationRefusal else None for r in results
        )
        _list(columns["block_ids"]).extend(
            () if type(r) is AllocationRefusal else [b.block_id for b in r] for r in results
        )

    def _record_preemption(self, step: int, seq: int, preemption: Preemption) -> None:
        row = (
            step,
            seq,
            self.request_index[preemption.request_id],
            self.request_index[preemption.needed_by],
            preemption.policy,
            preemption.num_computed_tokens_discarded,
            preemption.num_blocks_freed,
            preemption.num_tokens_refunded,
            preemption.num_preemptions,
            preemption.num_free_blocks_before,
            preemption.num_free_blocks_after,
        )
        for column, value in zip(self._buffers["_preemptions"].columns.values(), row, strict=True):
            _obj(column).values.append(value)

    def _record_admissions(self, step: int, engine_step: EngineStep, seq: Iterator[int]) -> None:
        output = engine_step.scheduler_output
        resumed = output.scheduled_cached_reqs.resumed_req_ids
        new = {data.req_id for data in output.scheduled_new_reqs}
        for req_id in output.num_scheduled_tokens:
            if req_id in new:
                self._event(step, seq, req_id, "admit", None)
            elif req_id in resumed:
                self._event(step, seq, req_id, "resume", None)

    def _record_outputs(self, step: int, engine_step: EngineStep, seq: Iterator[int]) -> int:
        """Sampled tokens per request; returns how many requests finished."""
        runner_output = engine_step.model_runner_output
        rows = [
            (req_id, tokens)
            for req_id, tokens in zip(
                runner_output.req_ids, runner_output.sampled_token_ids, strict=True
            )
            if tokens
        ]
        columns = self._buffers["_outputs"].columns
        finished = {o.request_id: o for o in engine_step.outputs if o.finish_reason is not None}
        _int(columns["step"]).values.extend(array("i", [step]) * len(rows))
        _int(columns["request_index"]).values.extend(
            self.request_index[req_id] for req_id, _ in rows
        )
        token_ids = _list(columns["token_ids"])
        if self.redactor is None:
            token_ids.extend(tokens for _, tokens in rows)
        else:
            token_ids.extend(self.redactor.tokens(tokens) for _, tokens in rows)
        reasons, stops = _obj(columns["finish_reason"]), _obj(columns["stop_reason"])
        if not finished:
            reasons.values.extend([None] * len(rows))
            stops.values.extend([None] * len(rows))
            return 0
        for req_id, _ in rows:
            output = finished.get(req_id)
            reasons.values.append(None if output is None else str(output.finish_reason))
            stops.values.append(None if output is None else self._stop_reason(output.stop_reason))
        for req_id, output in finished.items():
            self._event(step, seq, req_id, "finish", str(output.finish_reason))
        return len(finished)

    def _stop_reason(self, stop_reason: int | str | None) -> int | None:
        if not isinstance(stop_reason, int):
            return None
        return stop_reason if self.redactor is None else self.redactor.token(stop_reason)


def _admission_rows(engine_step: EngineStep) -> list[tuple[str, int, int, tuple[int, ...]]]:
    """(kind, computed_before, num_output_tokens, block table) per admission, in output order."""
    output = engine_step.scheduler_output
    cached = output.scheduled_cached_reqs
    new = {data.req_id: data for data in output.scheduled_new_reqs}
    resumed = {
        req_id: index
        for index, req_id in enumerate(cached.req_ids)
        if req_id in cached.resumed_req_ids
    }
    rows = []
    for req_id in itertools.islice(
        output.num_scheduled_tokens, len(cached.req_ids) - len(resumed), None
    ):
        if req_id in new:
            data = new[req_id]
            rows.append(("new", data.num_computed_tokens, 0, data.block_ids))
        else:
            index = resumed[req_id]
            rows.append(
                (
                    "resumed",
                    cached.num_computed_tokens[index],
                    cached.num_output_tokens[index],
                    cached.new_block_ids[index] or (),
                )
            )
    return rows


def _config_table(config: EngineConfig) -> pa.Table:
    values = config.to_dict()
    return pa.table({name: [value] for name, value in values.items()})


def _new_buffers() -> dict[str, TableBuffer]:
    """One buffer per recorded table, columns in `tables.sql` order."""
    enums = enum_types()
    return {
        spec.name: buffer_for(spec, enums)
        for spec in table_specs()
        if spec.name not in ("_meta", "_config")
    }


def _int(column: object) -> IntColumn:
    assert isinstance(column, IntColumn)
    return column


def _enum(column: object) -> EnumColumn:
    assert isinstance(column, EnumColumn)
    return column


def _list(column: object) -> ListColumn:
    assert isinstance(column, ListColumn)
    return column


def _obj(column: object) -> ObjectColumn:
    assert isinstance(column, ObjectColumn)
    return column
