"""A trace's inputs taken back out: the config, the requests, and what the model said."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from stepscope.engine import EngineConfig, InputError, SamplingParams, Workload
from stepscope.engine.workload import RequestSpec
from stepscope.schema import Trace

from . import shared_ints
from .row_order import request_then_step
from .sql import query

SPARE_STEPS = 1000
"""How far past the recorded run a replay may go when the trace lacks max_steps."""

REQUIRED_INPUTS = (
    "arrival_time",
    "priority",
    "prompt_token_ids",
    "max_tokens",
    "min_tokens",
    "temperature",
    "top_k",
    "top_p",
)
"""`request_inputs.sql`'s columns a request cannot replay without, besides the keys
`Trace.check_keys` checks first (its id and arrival step); the rest: NULL is "none"."""


def recorded_outputs(trace: Trace) -> dict[str, tuple[int, ...]]:
    """Each request's sampled tokens in order: the tape a replay feeds the engine (its ints
    shared: `shared_ints`)."""
    if trace.sql(query("has_verified_drafts")).fetchall()[0][0]:
        rows = trace.sql(query("recorded_outputs")).to_arrow_table()
        if pc.list_flatten(rows["token_ids"]).null_count:
            raise InputError(f"{trace.path}: _spec_decode.sampled_token_ids holds a NULL token id")
        tapes = shared_ints.list_column(rows["token_ids"])
        return dict(zip(rows["request_id"].to_pylist(), tapes, strict=True))
    return _one_token_per_step(trace)


def _one_token_per_step(trace: Trace) -> dict[str, tuple[int, ...]]:
    """The tapes read as flat rows and cut per request (no list aggregate to build)."""
    ids = dict(trace.sql(query("request_ids")).fetchall())
    rows = trace.sql(query("recorded_tokens")).to_arrow_table()
    requests = rows["request_index"].to_numpy()
    order = request_then_step(requests, rows["step"].to_numpy())
    ends = np.cumsum(np.bincount(requests)).tolist() if len(requests) else []
    tapes = shared_ints.cut(rows["token_id"].to_numpy()[order], ends)
    starts = [0, *ends[:-1]]
    return {ids[i]: tape for i, tape in enumerate(tapes) if ends[i] > starts[i]}


def workload_from_trace(trace: Trace, knobs: Mapping[str, Any] | None = None) -> Workload:
    """The recorded workload, each request's tape being what the model sampled for it."""
    trace.check_keys()  # the replay reads every recorded row by them
    config = _config(trace)
    if knobs:
        config = config.with_knobs(knobs)
    outputs = recorded_outputs(trace)
    requests = tuple(
        _request_spec(row, outputs.get(row["request_id"], ()), trace)
        for row in _request_inputs(trace)
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
    """Each request's recorded inputs by column name (`sql/request_inputs.sql`), the prompts'
    ints shared (`shared_ints`)."""
    table = trace.sql(query("request_inputs")).to_arrow_table()
    _check_required(table, trace)
    prompts = shared_ints.list_column(table["prompt_token_ids"])
    names = [name for name in table.column_names if name != "prompt_token_ids"]
    columns = [table[name].to_pylist() for name in names]
    rows = [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]
    for row, prompt in zip(rows, prompts, strict=True):
        row["prompt_token_ids"] = prompt
    return rows


def _check_required(table: pa.Table, trace: Trace) -> None:
    """A request that lacks an input a replay needs is an error naming it (the first such)."""
    for name in REQUIRED_INPUTS:
        column = table[name].combine_chunks()
        missing, problem = column.is_null().to_numpy(zero_copy_only=False), "is NULL"
        if name == "prompt_token_ids" and not missing.any():
            missing, problem = _null_items(column), "holds a NULL token id"
        if missing.any():
            row = int(np.argmax(missing))
            request_id = table["request_id"][row].as_py()
            raise InputError(
                f"{trace.path}: request {request_id!r}: {name} {problem}; a replay needs it"
            )


def _null_items(lists: pa.ListArray) -> np.ndarray:
    """Which lists hold a NULL item (a row mask)."""
    rows = np.zeros(len(lists), dtype=bool)
    items = pc.list_flatten(lists)
    if items.null_count:
        parents = pc.list_parent_indices(lists).to_numpy()
        rows[parents[items.is_null().to_numpy(zero_copy_only=False)]] = True
    return rows


def _features(row: Mapping[str, Any]) -> dict[str, Any]:
    """The request's optional-feature inputs (an older trace's read as NULL)."""
    accept = row["draft_accept"]
    return {
        "lora_id": row["lora_id"],
        "grammar_ready_step": row["grammar_ready_step"],
        "draft_mismatch_every": row["draft_mismatch_every"],
        "draft_accept": None if accept is None else tuple(accept),
    }


def _request_spec(row: Mapping[str, Any], outputs: tuple[int, ...], trace: Trace) -> RequestSpec:
    try:
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
    except ValueError as error:  # a value out of range, in a file edited by hand
        raise InputError(f"{trace.path}: request {row['request_id']!r}: {error}") from None
    return RequestSpec(
        request_id=row["request_id"],
        arrival_step=row["arrival_step"],
        arrival_time=row["arrival_time"],
        prompt_token_ids=row["prompt_token_ids"],
        output_token_ids=outputs,
        sampling_params=sampling,
        priority=row["priority"],
        abort_step=row["abort_step"],
        abort_before_update=bool(row["abort_before_update"]),
        **_features(row),
    )
