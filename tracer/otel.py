"""OpenTelemetry export: a span per engine step, and a span per request when it finishes.

An export for dashboards that already speak OpenTelemetry; the trace file remains
the record. Step spans carry scheduler attributes under `stepscope.`; request spans
use the `gen_ai.*` names vLLM's own request spans use where they fit.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stepscope.engine import EngineStep, InputError, Scheduler, StepRecord, Workload, step_counts

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

EXPORTERS = ("console", "otlp")


def exporter_from_env(choice: str | None) -> str | None:
    """`--otel` if given, else OTEL_TRACES_EXPORTER ('none' or unset: no export)."""
    name = choice or os.environ.get("OTEL_TRACES_EXPORTER")
    if name is None or name == "none":
        return None
    if name not in EXPORTERS:
        raise InputError(f"--otel {name!r}: expected one of {', '.join(EXPORTERS)}")
    return name


def make_span_exporter(name: str) -> SpanExporter:
    """The exporter; OTLP reads OTEL_EXPORTER_OTLP_* variables for its endpoint and headers."""
    try:
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            return ConsoleSpanExporter()
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    except ImportError:
        raise InputError(
            f"--otel {name}: OpenTelemetry is not installed (pip install 'stepscope[otel]')"
        ) from None


def make_tracer_provider(exporter: SpanExporter) -> TracerProvider:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "stepscope"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


@dataclass
class _RequestTimes:
    arrival_ns: int
    scheduled_ns: int | None = None
    first_token_ns: int | None = None
    num_output_tokens: int = 0
    num_preemptions: int = 0


class StepSpans:
    """Turns each `StepRecord` into spans as the run goes."""

    def __init__(self, provider: TracerProvider, workload: Workload) -> None:
        self.provider = provider
        self.tracer: Tracer = provider.get_tracer("stepscope")
        self.specs = {spec.request_id: spec for spec in workload.requests}
        self.requests: dict[str, _RequestTimes] = {}

    def on_step(self, record: StepRecord, scheduler: Scheduler) -> None:
        now = time.time_ns()
        for request_id in record.arrived:
            self.requests[request_id] = _RequestTimes(arrival_ns=now)
        for request_id in record.aborted:
            self._request_span(request_id, record.step, "abort", now)
        engine_step = record.engine_step
        if engine_step is None:
            return
        started = now - engine_step.schedule_ns - engine_step.model_ns - engine_step.update_ns
        self._step_span(record.step, engine_step, scheduler, started)
        self._note_tokens(engine_step, started, now)
        for output in engine_step.outputs:
            if output.finish_reason is not None:
                self._request_span(output.request_id, record.step, str(output.finish_reason), now)

    def _step_span(
        self, step: int, engine_step: EngineStep, scheduler: Scheduler, started: int
    ) -> None:
        counts = step_counts(engine_step)
        num_running, num_waiting = scheduler.get_request_counts()
        attributes: dict[str, Any] = {
            "stepscope.step": step,
            "stepscope.num_scheduled_tokens": counts.num_scheduled_tokens,
            "stepscope.num_scheduled_reqs": counts.num_scheduled_reqs,
            "stepscope.num_new_reqs": counts.num_new_reqs,
            "stepscope.num_resumed_reqs": counts.num_resumed_reqs,
            "stepscope.num_preempted_reqs": counts.num_preempted_reqs,
            "stepscope.num_running": num_running,
            "stepscope.num_waiting": num_waiting,
            "stepscope.num_free_blocks": counts.num_free_blocks_after_schedule,
        }
        schedule_end = engine_step.schedule_end
        if schedule_end is not None:
            attributes["stepscope.running_pass_end"] = str(schedule_end.running_pass_end)
            attributes["stepscope.admission_stop"] = str(schedule_end.admission_stop)
        end = started + engine_step.schedule_ns + engine_step.model_ns + engine_step.update_ns
        span = self.tracer.start_span("engine_step", start_time=started, attributes=attributes)
        parent = _context_of(span)
        cursor = started
        for name, duration in (
            ("schedule", engine_step.schedule_ns),
            ("execute_model", engine_step.model_ns),
            ("update_from_output", engine_step.update_ns),
        ):
            child = self.tracer.start_span(name, context=parent, start_time=cursor)
            cursor += duration
            child.end(end_time=cursor)
        span.end(end_time=end)

    def _note_tokens(self, engine_step: EngineStep, started: int, now: int) -> None:
        for request_id in engine_step.scheduler_output.preempted_req_ids:
            self.requests[request_id].num_preemptions += 1
        runner_output = engine_step.model_runner_output
        for request_id in engine_step.scheduler_output.num_scheduled_tokens:
            times = self.requests.get(request_id)
            if times is None:
                continue
            if times.scheduled_ns is None:
                times.scheduled_ns = started
            sampled = runner_output.sampled_token_ids[runner_output.req_id_to_index[request_id]]
            if sampled:
                times.num_output_tokens += len(sampled)
                if times.first_token_ns is None:
                    times.first_token_ns = now

    def _request_span(self, request_id: str, step: int, finish_reason: str, now: int) -> None:
        times = self.requests.pop(request_id, None)
        spec = self.specs[request_id]
        if times is None:
            return
        attributes: dict[str, Any] = {
            "gen_ai.request.id": request_id,
            "gen_ai.request.max_tokens": spec.sampling_params.max_tokens,
            "gen_ai.usage.prompt_tokens": len(spec.prompt_token_ids),
            "gen_ai.usage.completion_tokens": times.num_output_tokens,
            "gen_ai.response.finish_reasons": (finish_reason,),
            "gen_ai.latency.e2e": (now - times.arrival_ns) / 1e9,
            "stepscope.arrival_step": spec.arrival_step,
            "stepscope.finish_step": step,
            "stepscope.num_preemptions": times.num_preemptions,
            "stepscope.priority": spec.priority,
        }
        if times.scheduled_ns is not None:
            attributes["gen_ai.latency.time_in_queue"] = (
                times.scheduled_ns - times.arrival_ns
            ) / 1e9
        if times.first_token_ns is not None:
            attributes["gen_ai.latency.time_to_first_token"] = (
                times.first_token_ns - times.arrival_ns
            ) / 1e9
        span = self.tracer.start_span(
            "llm_request", start_time=times.arrival_ns, attributes=attributes
        )
        span.end(end_time=now)

    def close(self) -> None:
        self.provider.shutdown()


def _context_of(span: Any) -> Context:
    from opentelemetry import trace

    return trace.set_span_in_context(span)
