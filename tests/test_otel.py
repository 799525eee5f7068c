"""OpenTelemetry export: a span per step with phase children, a span per finished request."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from stepscope.engine import InputError, load_workload
from stepscope.tracer.otel import StepSpans, exporter_from_env, make_tracer_provider
from traces import case, record


def test_spans_for_steps_and_requests(tmp_path: Path) -> None:
    workload = load_workload(case("03"))
    exporter = InMemorySpanExporter()
    spans = StepSpans(make_tracer_provider(exporter), workload)
    record(workload, tmp_path / "t.duckdb", sinks=[spans])
    spans.close()
    finished = exporter.get_finished_spans()
    steps = [s for s in finished if s.name == "engine_step"]
    assert len(steps) == 13
    by_step = {s.attributes["stepscope.step"]: s for s in steps}
    assert by_step[6].attributes["stepscope.num_preempted_reqs"] == 1
    assert by_step[6].attributes["stepscope.admission_stop"] == "preempted_this_step"
    assert by_step[9].attributes["stepscope.num_resumed_reqs"] == 1
    children = [
        s
        for s in finished
        if s.parent is not None and s.parent.span_id == by_step[6].context.span_id
    ]
    assert [c.name for c in sorted(children, key=lambda c: c.start_time)] == [
        "schedule", "execute_model", "update_from_output",
    ]  # fmt: skip
    assert children[0].start_time >= by_step[6].start_time
    requests = {s.attributes["gen_ai.request.id"]: s for s in finished if s.name == "llm_request"}
    assert set(requests) == {"r0", "r1", "r2"}
    r1 = requests["r1"].attributes
    assert r1["gen_ai.usage.prompt_tokens"] == 7
    assert r1["gen_ai.usage.completion_tokens"] == 9
    assert r1["stepscope.num_preemptions"] == 1
    assert r1["gen_ai.response.finish_reasons"] == ("stop",)
    assert r1["gen_ai.latency.e2e"] >= r1["gen_ai.latency.time_to_first_token"] >= 0


def test_exporter_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    assert exporter_from_env(None) is None
    assert exporter_from_env("console") == "console"
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    assert exporter_from_env(None) == "otlp"
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert exporter_from_env(None) is None
    with pytest.raises(InputError, match="expected one of console, otlp"):
        exporter_from_env("jaeger")
