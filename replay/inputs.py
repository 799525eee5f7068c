"""A trace's inputs taken back out: the config, the requests, and what the model said."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stepscope.engine import EngineConfig, InputError, SamplingParams, Workload
from stepscope.engine.workload import RequestSpec
from stepscope.schema import Trace

from .sql import query

_REQUESTS_SQL = """
SELECT request_id, arrival_step, arrival_time, priority, prompt_token_ids, max_tokens,
       min_tokens, eos_token_id, stop_token_ids, abort_step, abort_before_update,
       temperature, top_k, top_p, seed
FROM _requests
ORDER BY request_index
"""

_OUTPUTS_SQL = """
SELECT r.request_id, list(s.sampled_token_id ORDER BY s.step) AS token_ids
FROM _scheduled s
JOIN _requests r USING (request_index)
WHERE s.sampled_token_id IS NOT NULL
GROUP BY r.request_id
"""

SPARE_STEPS = 1000
"""How far past the recorded run a replay may go when the trace lacks max_steps."""


def recorded_outputs(trace: Trace) -> dict[str, list[int]]:
    """Each request's sampled tokens in order: the tape a replay feeds the engine."""
    return {request_id: list(tokens) for request_id, tokens in trace.sql(_OUTPUTS_SQL).fetchall()}


def workload_from_trace(trace: Trace, knobs: Mapping[str, Any] | None = None) -> Workload:
    """The recorded workload, each request's tape being what the model sampled for it."""
    config = _config(trace)
    if knobs:
        config = config.with_knobs(knobs)
    outputs = recorded_outputs(trace)
    requests = tuple(
        _request_spec(row, outputs.get(row[0], [])) for row in trace.sql(_REQUESTS_SQL).fetchall()
    )
    max_steps = trace.meta.get("max_steps", "")
    if max_steps.isdigit():
        steps = int(max_steps)
    else:
        steps = int(trace.meta.get("num_steps", "0") or 0) + SPARE_STEPS
    abort_order = tuple(row[0] for row in trace.sql(query("abort_order")).fetchall())
    description = trace.meta.get("description", "")
    return Workload(config, requests, steps, description, str(trace.path), abort_order)


def _config(trace: Trace) -> EngineConfig:
    """The recorded config; a trace without `vllm_version` in it follows its meta's, if any."""
    recorded = dict(trace.config)
    if recorded.get("vllm_version") is None and "vllm_version" in trace.meta:
        recorded["vllm_version"] = trace.meta["vllm_version"]
    try:
        return EngineConfig.from_dict(recorded)
    except InputError as error:
        raise InputError(f"{trace.path}: the recorded config does not load: {error}") from None


def _request_spec(row: tuple[Any, ...], outputs: list[int]) -> RequestSpec:
    (request_id, arrival_step, arrival_time, priority, prompt, max_tokens, min_tokens, eos,
     stops, abort_step, abort_before_update, temperature, top_k, top_p, seed) = row  # fmt: skip
    sampling = SamplingParams(
        max_tokens, min_tokens, eos, tuple(stops or ()), temperature, top_k, top_p, seed
    )
    return RequestSpec(
        request_id=request_id,
        arrival_step=arrival_step,
        arrival_time=arrival_time,
        prompt_token_ids=tuple(prompt),
        output_token_ids=tuple(outputs),
        sampling_params=sampling,
        priority=priority,
        abort_step=abort_step,
        abort_before_update=bool(abort_before_update),
    )
