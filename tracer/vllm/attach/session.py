"""A recording attached to one live vLLM scheduler: its calls become stepscope steps.

vLLM's `EngineCore` calls the scheduler; the session wraps those calls on the
scheduler instance and numbers engine iterations the way stepscope's step loop
does, so the trace replays through either engine:

* an iteration starts at each `schedule()`, or at an `update_from_output()` that
  the current iteration has no room for (the batch queue draining, async only);
* requests added and aborts made between iterations belong to the next one; an
  abort made after an iteration's `schedule()` and before its update (vLLM's
  `_process_aborts_queue`) is recorded as landing before the update;
* under async scheduling an iteration whose batch queue was empty before its
  `schedule()` ends without an update, exactly when `step_with_batch_queue` returns
  early; the next iteration updates that batch.

A checkpoint (`checkpointer.py`) is taken when the first of an iteration's arrivals,
aborts or scheduler calls comes, before it touches the scheduler: the state at the
step's start, as stepscope's step loop takes it. It is recorded with its step, and
dropped if the iteration never becomes one.

The engine thread spends as little as it can: it keeps references to vLLM's objects
and reads the counts that change, and the recorder's builder thread converts them
(`step_builder.py`). A step is recorded once its batch's output has been processed (one
iteration later under async scheduling), in step order. Once the engine has nothing left
(no request, no batch in flight) every step is committed and the trace marked
complete; the next arrival marks it incomplete again. vLLM's API server kills its
engine core right after SIGTERM, so this is what a server stopped while idle
leaves. A failure inside the recording never reaches vLLM: it is logged once,
the recording stops, and every step written so far is kept.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from stepscope.engine import EngineConfig, Workload
from stepscope.engine.probe import ScheduleEnd, ScheduleStart
from stepscope.engine.workload import RequestSpec
from stepscope.tracer.background import BackgroundRecorder, RecorderStalled
from stepscope.tracer.recorder import TraceRecorder
from stepscope.tracer.redact import Redactor
from stepscope.tracer.writer import TraceWriteError

from . import convert, settings
from .allocation_tap import AllocationTap, decision_records
from .checkpointer import VllmCheckpointer
from .grammar_readiness import CompilingRequest, GrammarReadiness, failed_to_compile
from .grammar_readiness import request_outside_subset as structured_output_outside_subset
from .held_blocks import held_blocks_counter
from .iterations import Batch, Iteration, QueueState
from .schedule_facts import ScheduleFacts, StartValues, prefill_held
from .step_builder import VllmStepBuilder, engine_outputs
from .subset import kv_cache_groups_outside_subset, outside_subset, request_outside_subset

logger = logging.getLogger("stepscope.tracer.vllm")

SCHEDULER_CALLS = ("add_request", "finish_requests", "schedule", "update_from_output")
"""The scheduler's methods a recording wraps on the instance (and, with drafts, one more)."""
DRAFTS_CALL = "update_draft_token_ids"


def _drafts_follow_update(scheduler: Any) -> bool:
    """Whether `EngineCore.post_step` hands drafts over after each update (sync spec decoding)."""
    if scheduler.vllm_config.speculative_config is None:
        return False
    return not scheduler.scheduler_config.async_scheduling


def _background_recorder(
    path: Path,
    workload: Workload,
    meta: Mapping[str, str],
    redactor: Redactor | None,
    chosen: settings.RecordingSettings,
    *,
    driven: bool,
) -> BackgroundRecorder:
    """The recorder, its rows built off the engine thread: a driven run (a planned workload)
    waits for its builder, a server's drops steps instead and, unless set otherwise, runs its
    threads at the lowest priority."""
    recorder = BackgroundRecorder(
        TraceRecorder(path, workload, meta, redactor=redactor, segments=chosen.segments),
        lossless=driven,
        low_priority=not driven and chosen.low_priority,
    )
    if chosen.backlog_steps is not None:
        recorder.backlog_steps = chosen.backlog_steps
    return recorder


class VllmRecording:
    """Follows one vLLM scheduler and writes each of its steps to a trace."""

    def __init__(
        self,
        scheduler: Any,
        path: Path,
        meta: Mapping[str, str],
        planned: Workload | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        chosen = settings.read(scheduler.vllm_config)
        config = convert.engine_config(scheduler)
        workload = planned.with_config(config) if planned is not None else Workload(config, ())
        self.scheduler = scheduler
        self.planned = {spec.request_id: spec for spec in workload.requests}
        self.prune = chosen.prune
        """The directory a server's engine prunes as it starts, and past what (None: none)."""
        self.reasons = outside_subset(scheduler, config)
        full_meta = {**meta, "outside_subset": "; ".join(sorted(self.reasons))}
        self.recorder = _background_recorder(
            path, workload, full_meta, redactor, chosen, driven=planned is not None
        )
        # A checkpoint holds KV cache groups the engine models (and block hashes of real tokens).
        can_checkpoint = redactor is None and not kv_cache_groups_outside_subset(scheduler, config)
        self.checkpointer = self._checkpointer(config, chosen, can_checkpoint=can_checkpoint)
        """None: no checkpoints (turned off, a redacted recording, or KV cache groups the engine
        does not model) and one file; a segmented recording always has one (it opens segments)."""
        self.async_scheduling = config.async_scheduling
        self.kv_cache_groups = config.kv_cache_groups
        self.drafts_follow_update = _drafts_follow_update(scheduler)
        self.speculative_decoding = config.num_speculative_tokens > 0
        self.queue_state = QueueState(scheduler)
        self.count_held_blocks = held_blocks_counter(scheduler)
        self.facts = ScheduleFacts(scheduler)
        self.tap = AllocationTap(
            scheduler, lambda: self.recorder.decisions, self.reasons.add, self._failed
        )
        self.grammars = GrammarReadiness()
        self.steps = VllmStepBuilder(
            config.kv_cache_groups, speculative_decoding=self.speculative_decoding
        )
        """The builder thread's side: only calls handed to the recorder touch it."""
        self.arrived: set[str] = set()
        """Every request id seen (segmented: since the open segment began, and those the
        scheduler holds): a second request with one is left out of the trace."""
        self.step = -1
        self.num_recorded = 0
        """Iterations handed to the recorder: the next one to record is numbered so."""
        self.active = True
        self._start: StartValues = (0, 0, 0, 0)
        self._held = False
        """The `schedule()` under way holds prefill (read only with a prefill cadence)."""
        self._arrived: list[str] = []
        self._rejected: list[str] = []
        self._aborted: list[str] = []
        self._current: Iteration | None = None
        """The iteration whose update is still to come (None between iterations)."""
        self._iterations: deque[Iteration] = deque()
        self._in_flight: dict[int, Iteration] = {}
        self._originals: dict[str, Callable[..., Any]] = {}
        self._marked_complete = False
        """The trace on disk says complete: the engine went idle with every step written."""
        self._awaiting_drafts: Batch | None = None
        """The batch just updated, whose drafts `post_step` hands the scheduler next."""
        self._runner_output: Any = None
        """The model's output of the update in progress, as it came (with drafts: a copy
        taken before the update, which trims the sampled lists a stop cuts short)."""

    def _checkpointer(
        self, config: EngineConfig, chosen: settings.RecordingSettings, *, can_checkpoint: bool
    ) -> VllmCheckpointer | None:
        """The recording's checkpointer, if it takes checkpoints or opens segments."""
        interval, segments = chosen.interval, chosen.segments
        if segments is None and (interval is None or not can_checkpoint):
            return None
        return VllmCheckpointer(
            self.scheduler,
            self.recorder,
            interval,
            None if segments is None else segments.every,
            can_checkpoint=can_checkpoint,
            keyed_by_group=config.kv_cache_groups is not None,
            on_segment_open=self._forget_finished_ids,
        )

    # ----- attaching ------------------------------------------------------------

    def attach(self) -> VllmRecording:
        """Wrap the scheduler's calls on this instance; its class is left as it is."""
        scheduler = self.scheduler
        calls = SCHEDULER_CALLS + ((DRAFTS_CALL,) if self.drafts_follow_update else ())
        for name in calls:
            self._originals[name] = getattr(scheduler, name)
            setattr(scheduler, name, getattr(self, name))
        self._schedule = self._originals["schedule"]
        self._update_from_output = self._originals["update_from_output"]
        self.tap.attach()
        return self

    def detach(self) -> None:
        """Give the scheduler its own methods back: it runs unwrapped from here on."""
        self.tap.detach()
        for name in self._originals:
            vars(self.scheduler).pop(name, None)

    def _guarded(self, action: Callable[[], None]) -> None:
        """Run a piece of recording; a failure stops the recording, never the engine."""
        if not self.active:
            return
        try:
            action()
        except Exception as error:
            self._failed(error)

    def _failed(self, error: Exception) -> None:
        """A piece of recording failed: the recording stops, the engine goes on."""
        if isinstance(error, TraceWriteError | RecorderStalled):
            logger.error("stepscope: recording failed: %s; the trace keeps the steps so far", error)
        else:
            logger.error(
                "stepscope: recording failed; the trace keeps the steps so far", exc_info=error
            )
        self._stop_recording()

    def _stop_recording(self) -> None:
        """A failure stopped the recording: vLLM runs on unwrapped, the trace is closed."""
        if self.active:
            self.active = False
            self.detach()
            try:
                self.recorder.close(complete=False, final_meta=self._final_meta())
            except TraceWriteError:
                pass  # the file cannot be written: the error above said so once
            except Exception:
                logger.exception("stepscope: closing the trace failed")

    # ----- the scheduler's calls ----------------------------------------------

    def add_request(self, request: Any) -> None:
        self._guarded(self._between_iterations)
        self._originals["add_request"](request)
        self._guarded(lambda: self._on_arrival(request))

    def finish_requests(self, request_ids: Any, finished_status: Any) -> list[Any]:
        self._guarded(self._between_iterations)
        finished: list[Any] = self._originals["finish_requests"](request_ids, finished_status)
        self._guarded(lambda: self._on_finish_requests(finished, finished_status))
        return finished

    def update_draft_token_ids(self, draft_token_ids: Any) -> None:
        self._guarded(lambda: self._on_drafts(draft_token_ids))
        self._originals["update_draft_token_ids"](draft_token_ids)

    # Both run every step: the recording's parts are guarded inline, not through `_guarded`.

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        if not self.active:
            return self._schedule(*args, **kwargs)
        in_flight_before = len(self._in_flight)
        try:
            self._before_schedule()
        except Exception as error:
            self._failed(error)
        started = time.perf_counter_ns()
        output = self._schedule(*args, **kwargs)
        scheduled_at = time.perf_counter_ns()
        if self.active:
            try:
                self._after_schedule(output, started, scheduled_at, in_flight_before)
            except Exception as error:
                self._failed(error)
        return output

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        if not self.active:
            return self._update_from_output(scheduler_output, model_runner_output)
        try:
            self._before_update(model_runner_output)
        except Exception as error:
            self._failed(error)
        started = time.perf_counter_ns()
        outputs = self._update_from_output(scheduler_output, model_runner_output)
        updated = time.perf_counter_ns()
        if self.active:
            try:
                self._after_update(scheduler_output, outputs, started, updated)
            except Exception as error:
                self._failed(error)
        return outputs

    # ----- calls a driver makes (a real server has neither) ----------------------

    def idle_step(self) -> None:
        """An iteration in which the engine had nothing to do (a scripted workload's gap)."""
        self._guarded(self._idle_step)

    def grammars_compiled(self) -> None:
        """Grammars are about to finish compiling (in a server: whenever they do, unseen)."""
        self._guarded(self._between_iterations)

    def reject(self, spec: RequestSpec) -> None:
        """A request the input processor turned away before it reached the scheduler."""

        def record() -> None:
            self.recorder.register_request(spec)
            self._rejected.append(spec.request_id)

        self._guarded(record)

    def close(self, *, finished: bool = True) -> None:
        """Record what is complete and close the trace (idempotent).

        The trace is marked complete if the run `finished` and no batch was left
        in flight.
        """
        if self.active:
            self.active = False
            self.detach()
            self._close(complete=finished and not self._in_flight)

    # ----- bookkeeping --------------------------------------------------------

    def _on_arrival(self, request: Any) -> None:
        if request.request_id in self.arrived:
            # A streaming-input session's next chunk, or an id used twice: the trace keys
            # requests by id, so the later input is left out.
            self.reasons.add("streaming input or a reused request id")
            return
        request_id = request.request_id
        self.arrived.add(request_id)
        if self._marked_complete:
            self._marked_complete = False
            self.recorder.mark(complete=False)
        arrival_step = self.step + 1
        planned = self.planned.get(request_id)
        trace, steps = self.recorder.recorder, self.steps

        def register() -> None:  # the builder thread: what it reads stays as it arrived
            spec = convert.request_spec(request, arrival_step=arrival_step)
            if planned is not None:
                spec = convert.with_planned(spec, planned)
            trace.register_request(spec)
            steps.arrived(request_id, spec.sampling_params)

        self.recorder.defer(register)
        self._arrived.append(request_id)
        self.reasons.update(request_outside_subset(request))
        known = planned is not None and planned.grammar_ready_step is not None
        self._follow_grammar(request, arrival_step, readiness_known=known)

    def _on_finish_requests(self, finished: list[Any], status: Any) -> None:
        self._grammars_never_ready(request.request_id for request in finished)
        if status.name != "FINISHED_ABORTED":
            self.reasons.add(f"requests finished from outside as {status.name}")
            return
        current = self._current
        late = current is not None and current.batch is not None and not current.has_update
        for request in finished:
            if late:
                assert current is not None
                current.aborted_before_update += (request.request_id,)
            else:
                self._aborted.append(request.request_id)

    def _between_iterations(self) -> None:
        """An arrival or abort: the next iteration's, unless it lands while the model runs."""
        self._end_update()
        if self._current is None:
            self._iteration_starts()

    def _iteration_starts(self) -> None:
        """The next iteration is about to touch the scheduler: its checkpoint, if due."""
        if self.checkpointer is not None:
            self.checkpointer.at_iteration_start(self.step + 1, self._in_flight)

    def _new_iteration(self, *, scheduling: bool = False) -> Iteration:
        self.step += 1
        iteration = Iteration(self.step, scheduling=scheduling)
        if self._arrived or self._rejected or self._aborted:
            iteration.arrived, iteration.rejected, iteration.aborted = (
                self._arrived,
                self._rejected,
                self._aborted,
            )
            self._arrived, self._rejected, self._aborted = [], [], []
        self._iterations.append(iteration)
        return iteration

    def _idle_step(self) -> None:
        self._end_update()
        self._current = None
        self._iteration_starts()
        self._new_iteration()
        self._record_complete()

    def _before_schedule(self) -> None:
        self._end_update()
        self._iteration_starts()
        self._current = self._new_iteration(scheduling=True)
        self.tap.start_step()
        self._start = self.facts.start()
        if self.facts.applies_prefill_cadence:
            self._held = prefill_held(self.scheduler)
        if self.grammars.compiling:
            self._grammars_ready(self.grammars.ready_at_schedule_start())
        if self.facts.paused():
            self.reasons.add("scheduling paused (set_pause_state)")

    def _after_schedule(
        self, output: Any, started: int, scheduled_at: int, in_flight_before: int
    ) -> None:
        self.tap.end_step()
        if self.grammars.compiling:
            self._grammars_ready(self.grammars.promoted_in_schedule())
        if self.grammars.structured and failed_to_compile(self.scheduler):
            self.reasons.add("structured output grammar failed to compile")
        iteration = self._current
        assert iteration is not None
        free_blocks = self.queue_state.get_num_free_blocks()
        held_blocks = None if self.count_held_blocks is None else self.count_held_blocks()
        start, facts, steps, tap = self._start, self.facts, self.steps, self.tap
        decisions = self.recorder.decisions
        end = facts.end(start, decisions, tap.last_refusal, output, held=self._held)
        prefix_cache = tap.prefix_cache
        spec_tokens = (
            convert.scheduled_spec_tokens(output)
            if self.speculative_decoding
            else output.scheduled_spec_decode_tokens
        )
        batch = Batch(
            output,
            spec_tokens,
            convert.handed_block_tables(output),
            free_blocks,
            scheduled_at - started,
            scheduled_at,
            held_blocks,
        )

        def schedule_call() -> tuple[ScheduleStart, ScheduleEnd]:  # the builder thread
            decision_records(decisions)
            steps.scheduled(batch)
            batch.end = facts.end_record(end, prefix_cache)
            return facts.start_record(start), batch.end

        self.recorder.schedule_call_of(schedule_call)
        iteration.batch = batch
        iteration.scheduling = False
        self._in_flight[id(output)] = iteration
        if self._returns_before_update(output, in_flight_before):
            self._current = None

    def _forget_finished_ids(self) -> None:
        """A segment opens: of the ids seen, keep those of requests the scheduler holds (a
        server's recording would otherwise hold every id it was sent; an id used again
        after that is recorded as a new request)."""
        self.arrived = set(self.scheduler.requests)

    def _returns_before_update(self, output: Any, in_flight_before: int) -> bool:
        """`step_with_batch_queue` returns right after scheduling when its queue was empty."""
        if not self.async_scheduling or in_flight_before > 0:
            return False
        return output.total_num_scheduled_tokens > 0 or bool(self.scheduler.has_requests())

    def _before_update(self, runner_output: Any) -> None:
        # With drafts, a copy before vLLM trims a stopped request's sampled list in place
        # (a list of one token is never trimmed).
        self._runner_output = (
            convert.model_runner_output(runner_output)
            if self.speculative_decoding
            else runner_output
        )
        self._end_update()
        current = self._current
        if current is None or current.has_update:
            self._iteration_starts()
            current = self._current = self._new_iteration()
        current.has_update = True

    def _after_update(
        self, scheduler_output: Any, outputs: Any, started: int, updated: int
    ) -> None:
        current = self._current
        assert current is not None
        iteration = self._in_flight.pop(id(scheduler_output))
        batch = iteration.batch
        assert batch is not None and batch.scheduler_output is scheduler_output
        batch.runner_output = self._runner_output
        batch.outputs = outputs
        batch.model_ns = started - batch.scheduled_at
        batch.update_ns = updated - started
        batch.update_step = current.step
        batch.updated = True
        if self.grammars.structured and self.grammars.rejected_tokens(
            engine_outputs(batch, speculative_decoding=self.speculative_decoding)
        ):
            self.reasons.add("structured output grammar rejected a sampled token")
        self._current = None
        checkpointer = self.checkpointer
        if checkpointer is not None and checkpointer.awaiting is not None:
            checkpointer.on_batch_processed(iteration.step, self._runner_output)
        if self.drafts_follow_update:
            self._awaiting_drafts = batch
        else:
            self._finish_update()

    def _on_drafts(self, drafts: Any) -> None:
        """`post_step` hands over the drafts proposed after the batch just updated."""
        batch = self._awaiting_drafts
        if batch is None or not batch.updated:
            self.reasons.add("draft tokens handed over outside post_step")
            return
        batch.draft_token_ids = convert.draft_token_ids(drafts)
        self._finish_update()

    def _end_update(self) -> None:
        """The scheduler is called again: the batch updated last gets no drafts."""
        if self._awaiting_drafts is not None:
            self._finish_update()

    def _finish_update(self) -> None:
        """Record the steps done; once the engine has nothing left, mark the trace complete."""
        self._awaiting_drafts = None
        self._record_complete()
        if self._in_flight or self._iterations:
            return
        scheduler = self.scheduler
        # A running request, unpaused, is one `has_requests()` counts (and cheaper to see).
        if scheduler.running and scheduler._pause_state is self.facts.unpaused:
            return
        if not scheduler.has_requests():
            self._marked_complete = True
            self.recorder.mark(complete=True, meta=self._final_meta())

    def _record_complete(self) -> None:
        """Record the oldest iterations whose batches are done, in step order.

        Only the next step in line is recorded: if a stop (Ctrl-C, a signal) cut the last
        one short, the trace ends before it, never with a gap or that step twice.
        """
        iterations, checkpointer = self._iterations, self.checkpointer
        while iterations:
            oldest = iterations[0]
            step = oldest.step
            if step != self.num_recorded or not oldest.complete:
                return
            iterations.popleft()
            if checkpointer is not None and checkpointer.complete:
                checkpointer.on_step_recorded(step)
            self.recorder.record_step_of(
                step, partial(self.steps.step_record, oldest), self.queue_state
            )
            self.num_recorded += 1

    def _close(self, *, complete: bool) -> None:
        try:
            self._grammars_ready(self.grammars.still_compiling(), self.step + 1)
            self._record_complete()
        finally:
            self.recorder.close(complete=complete, final_meta=self._final_meta())

    # ----- structured output ----------------------------------------------------

    def _follow_grammar(self, request: Any, arrival_step: int, *, readiness_known: bool) -> None:
        """Note when the request's grammar is ready, unless a scripted workload says."""
        if self.grammars.on_arrival(request, arrival_step, readiness_known=readiness_known):
            self.recorder.grammar_pending(request.request_id)
        speculative = self.speculative_decoding
        self.reasons.update(
            structured_output_outside_subset(request, speculative_decoding=speculative)
        )

    def _grammars_ready(self, ready: Iterable[CompilingRequest], step: int | None = None) -> None:
        """These requests' grammars are ready at `step` (the current one unless given)."""
        ready_step = self.step if step is None else step
        for compiling in ready:
            self.recorder.grammar_ready(compiling.request.request_id, ready_step)

    def _grammars_never_ready(self, request_ids: Iterable[str]) -> None:
        """These requests leave with their grammar still compiling: ready only after the
        last step they were held in, so a replay holds them as long."""
        self._grammars_ready(self.grammars.left(request_ids), self.step + 1)

    def _final_meta(self) -> dict[str, str]:
        return {"outside_subset": "; ".join(sorted(self.reasons))}
