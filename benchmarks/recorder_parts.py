"""The vLLM recorder's parts on the engine thread, each of which can be switched off, to tell
what each costs it (`vllm_engine_thread_parts.py`).

A diagnosis, not a recording: a part switched off records nothing of its own, so the builder
thread, in every run the diagnosis makes (the whole recorder's too), converts what it is
handed and builds no rows (rows of a step missing a part would not add up); the builder's work
does not show in the engine thread's CPU either way. The switches patch the recorder's classes
(`tracer/vllm/attach/`, `tracer/background.py`) in the worker's process only, so they follow
those classes' internals: a change there may need one here.
"""

from __future__ import annotations

from typing import Any

PARTS = {
    "admissions": "the waiting pass's allocate_slots calls (admissions, their refusals) untapped",
    "preemptions": "_preempt_request unwrapped (and so the running pass's refusal unread)",
    "skips": "the waiting pass's skips unreported (vLLM's own deferred_waiting set)",
    "re-tap": "allocate_slots not wrapped again between schedule() calls",
    "schedule facts": "no start or end of schedule() read (budgets, queues, why passes stopped)",
    "hand-over": "no step handed to the builder (no queue counts, clock or record)",
    "checkpointer": "no checkpointer (none is due in this load: its per-iteration checks)",
}
"""Each part, and what switching it off leaves out."""
EVERYTHING = "everything"
"""Every part, and `schedule()` and `update_from_output()` wrapped to pass straight through."""


def switch_off(parts: set[str]) -> None:
    """Patch the recorder so that `parts` (names in `PARTS`, or `EVERYTHING`; none: the whole
    recorder) do nothing, and its builder builds no rows."""
    unknown = parts - {*PARTS, EVERYTHING}
    if unknown:
        raise ValueError(f"unknown recorder parts: {sorted(unknown)}")
    if EVERYTHING in parts:
        parts = {*PARTS, EVERYTHING}
    _no_rows()
    _tap_parts(parts)
    _session_parts(parts)


def _no_rows() -> None:
    from stepscope.tracer.background import BackgroundRecorder

    def build_step(recorder: Any, make_record: Any, counts: Any, ended_at_ns: int) -> None:
        make_record()
        recorder._steps_built += 1

    BackgroundRecorder._build_step = build_step  # type: ignore[method-assign]
    BackgroundRecorder._schedule_call = lambda recorder, *args: None  # type: ignore[method-assign]


def _tap_parts(parts: set[str]) -> None:
    from stepscope.tracer.vllm.attach import allocation_tap

    tap_class = allocation_tap.AllocationTap

    def attach(tap: Any) -> None:
        scheduler = tap.scheduler
        if "re-tap" not in parts:
            tap._tap()
        if "preemptions" not in parts:
            scheduler._preempt_request = tap.preempt_request
        if "admissions" not in parts and tap._schedule_code is not None:
            scheduler._handle_blocked_waiting_request = tap.handle_blocked_waiting_request
        if "skips" not in parts:
            scheduler.deferred_waiting = allocation_tap._SkipReportingSet(
                scheduler.deferred_waiting, tap._skipped
            )

    tap_class.attach = attach  # type: ignore[method-assign]
    if "re-tap" in parts:

        def end_step(tap: Any) -> None:
            tap._in_schedule = False

        tap_class.end_step = end_step  # type: ignore[method-assign]


def _session_parts(parts: set[str]) -> None:
    from stepscope.engine.step_plan import AdmissionStop, RunningPassEnd
    from stepscope.tracer.background import BackgroundRecorder
    from stepscope.tracer.vllm.attach import schedule_facts, session

    if "schedule facts" in parts:
        facts = schedule_facts.ScheduleFacts
        facts.start = lambda self: (0, 0, 0, 0)  # type: ignore[method-assign]
        end = (RunningPassEnd.ALL_VISITED, AdmissionStop.NO_WAITING, None)
        facts.end = lambda self, *args, **kwargs: end  # type: ignore[method-assign]
    if "hand-over" in parts:
        BackgroundRecorder.record_step_of = lambda self, *args: None  # type: ignore[method-assign]
    recording = session.VllmRecording
    attach = recording.attach
    if "checkpointer" in parts:

        def attach_without_checkpointer(self: Any) -> Any:
            self.checkpointer = None
            return attach(self)

        recording.attach = attach_without_checkpointer  # type: ignore[method-assign]
    if EVERYTHING in parts:

        def schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
            return self._schedule(*args, **kwargs)

        def update_from_output(self: Any, scheduler_output: Any, runner_output: Any) -> Any:
            return self._update_from_output(scheduler_output, runner_output)

        recording.schedule = schedule  # type: ignore[method-assign]
        recording.update_from_output = update_from_output  # type: ignore[method-assign]
