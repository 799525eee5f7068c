"""A trace's inputs taken back out: the config, the requests, and what the model said."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from stepscope.engine import EngineConfig, InputError, SamplingParams, Workload
from stepscope.engine.workload import RequestSpec
from stepscope.schema import Trace

from .row_order import request_then_step
from .sql import query

SPARE_STEPS = 1000
"""How far past the recorded run a replay may go when the trace lacks max_steps."""


def recorded_outputs(trace: Trace) -> dict[str, list[int]]:
    """Each request's sampled tokens in order: the tape a replay feeds the engine."""
    if trace.sql(query("has_verified_drafts")).fetchall()[0][0]:
        rows = trace.sql(query("recorded_outputs")).fetchall()
        return {request_id: list(tokens) for request_id, tokens in rows}
    return _one_token_per_step(trace)


def _one_token_per_step(trace: Trace) -> dict[str, list[int]]:
    """The tapes read as flat rows and cut per request (no list aggregate to build)."""
    ids = dict(trace.sql(query("request_ids")).fetchall())
    rows = trace.sql(query("recorded_tokens")).to_arrow_table()
    requests = rows["request_index"].to_numpy()
    order = request_then_step(requests, rows["step"].to_numpy())
    tokens = rows["token_id"].to_numpy()[order]
    ends = np.cumsum(np.bincount(requests)).tolist() if len(requests) else []
    tapes, start = {}, 0
    for index, end in enumerate(ends):
        if end > start:
            tapes[ids[index]] = tokens[start:end].tolist()
        start = end
    return tapes


def workload_from_trace(trace: Trace, knobs: Mapping[str, Any] | None = None) -> Workload:
    """The recorded workload, each request's tape being what the model sampled for it."""
    config = _config(trace)
    if knobs:
        config = config.with_knobs(knobs)
    outputs = recorded_outputs(trace)
    requests = tuple(
        _request_spec(row, outputs.get(row["request_id"], [])) for row in _request_inputs(trace)
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


def _request_inputs(trace: Trace) -> list[dict[str, Any]]:
    """Each request's recorded inputs by column name (`sql/request_inputs.sql`)."""
    relation = trace.sql(query("request_inputs"))
    names = relation.columns
    return [dict(zip(names, row, strict=True)) for row in relation.fetchall()]


def _features(row: Mapping[str, Any]) -> dict[str, Any]:
    """The request's optional-feature inputs (an older trace's read as NULL)."""
    accept = row["draft_accept"]
    return {
        "lora_id": row["lora_id"],
        "grammar_ready_step": row["grammar_ready_step"],
        "draft_mismatch_every": row["draft_mismatch_every"],
        "draft_accept": None if accept is None else tuple(accept),
    }


def _request_spec(row: Mapping[str, Any], outputs: list[int]) -> RequestSpec:
    sampling = SamplingParams(
        max_tokens=row["max_tokens"],
        min_tokens=row["min_tokens"],
        eos_token_id=row["eos_token_id"],
        stop_token_ids=tuple(row["stop_token_ids"] or ()),
        temperature=row["temperature"],
        top_k=row["top_k"],
        top_p=row["top_p"],
        seed=row["seed"],
    )
    return RequestSpec(
        request_id=row["request_id"],
        arrival_step=row["arrival_step"],
        arrival_time=row["arrival_time"],
        prompt_token_ids=tuple(row["prompt_token_ids"]),
        output_token_ids=tuple(outputs),
        sampling_params=sampling,
        priority=row["priority"],
        abort_step=row["abort_step"],
        abort_before_update=bool(row["abort_before_update"]),
        **_features(row),
    )
