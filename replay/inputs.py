"""A trace's inputs taken back out: the config, the requests, and what the model said."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from stepscope.engine import EngineConfig, InputError, SamplingParams, Workload
from stepscope.engine.checkpoint import SchedulerCheckpoint
from stepscope.engine.workload import RequestSpec
from stepscope.schema import Trace

from . import shared_ints
from .row_order import request_then_step
from .sql import query
from .stored_alike import ALL_STEPS

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


def recorded_outputs(
    trace: Trace, steps: tuple[int, int] = (0, ALL_STEPS)
) -> dict[str, tuple[int, ...]]:
    """Each request's tokens sampled at `steps` (first, last), in order: the tape a replay
    feeds the engine (its ints shared: `shared_ints`)."""
    if trace.sql(query("has_verified_drafts")).fetchall()[0][0]:
        rows = trace.sql(query("recorded_outputs"), list(steps)).to_arrow_table()
        if pc.list_flatten(rows["token_ids"]).null_count:
            raise InputError(f"{trace.path}: _spec_decode.sampled_token_ids holds a NULL token id")
        tapes = shared_ints.list_column(rows["token_ids"])
        return dict(zip(rows["request_id"].to_pylist(), tapes, strict=True))
    return _one_token_per_step(trace, steps)


def _one_token_per_step(trace: Trace, steps: tuple[int, int]) -> dict[str, tuple[int, ...]]:
    """The tapes read as flat rows and cut per request (no list aggregate to build)."""
    rows = trace.sql(query("recorded_tokens"), list(steps)).to_arrow_table()
    requests = rows["request_index"].to_numpy()
    ids = request_ids(trace, np.unique(requests).tolist())
    order = request_then_step(requests, rows["step"].to_numpy())
    ends = np.cumsum(np.bincount(requests)).tolist() if len(requests) else []
    tapes = shared_ints.cut(rows["token_id"].to_numpy()[order], ends)
    starts = [0, *ends[:-1]]
    return {ids[i]: tape for i, tape in enumerate(tapes) if ends[i] > starts[i]}


def workload_from_trace(
    trace: Trace,
    knobs: Mapping[str, Any] | None = None,
    since: SchedulerCheckpoint | None = None,
    until: int = ALL_STEPS,
) -> Workload:
    """The recorded workload, each request's tape being what the model sampled for it.

    `since` a checkpoint, only what a run from it needs: the requests unfinished there
    (their tapes the tokens they had, then those sampled from its step on) and those
    arriving from its step on, so the rows read do not grow with the steps before it; and
    only what a run to step `until` needs (the requests arriving by then, the tokens
    sampled by then), so they do not grow with the steps after it either.
    """
    trace.check_keys()  # the replay reads every recorded row by them
    config = recorded_config(trace)
    if knobs:
        config = config.with_knobs(knobs)
    first_step = 0 if since is None else since.step
    outputs = recorded_outputs(trace, (first_step, until))
    unfinished: list[int] = []
    if since is not None:
        outputs = _taken_up(since, outputs)
        by_id = request_indices(trace, [rc.request_id for rc in since.requests])
        unfinished = [by_id[rc.request_id] for rc in since.requests]
    requests = tuple(
        _request_spec(row, outputs.get(row["request_id"], ()), trace)
        for row in _request_inputs(trace, (first_step, until), unfinished)
    )
    max_steps = trace.meta.get("max_steps", "")
    past_the_end = max(trace.last_step + 1, 0) + SPARE_STEPS  # a window's steps start past 0
    steps = int(max_steps) if max_steps.isdigit() else past_the_end
    abort_order = tuple(row[0] for row in trace.sql(query("abort_order")).fetchall())
    description = trace.meta.get("description", "")
    return Workload(config, requests, steps, description, str(trace.path), abort_order)


def request_ids(trace: Trace, indices: list[int]) -> dict[int, str]:
    """The ids of the requests numbered `indices`, by index (those the trace holds)."""
    return dict(trace.sql(query("request_ids_of"), [indices]).fetchall())


def request_indices(trace: Trace, ids: list[str]) -> dict[str, int]:
    """The indices of the requests `ids`, by id (those the trace holds)."""
    return dict(trace.sql(query("request_indices_of"), [ids]).fetchall())


def recorded_config(trace: Trace) -> EngineConfig:
    """The recorded config; a trace without `vllm_version` in it follows its meta's, if any."""
    recorded = dict(trace.config)
    if recorded.get("kv_cache_groups") is not None:
        recorded["kv_cache_groups"] = [
            {key: value for key, value in group.items() if value is not None}
            for group in recorded["kv_cache_groups"]
        ]
    if recorded.get("vllm_version") is None and "vllm_version" in trace.meta:
        recorded["vllm_version"] = trace.meta["vllm_version"]
    try:
        return EngineConfig.from_dict(recorded)
    except InputError as error:
        raise InputError(f"{trace.path}: the recorded config does not load: {error}") from None


def _taken_up(
    checkpoint: SchedulerCheckpoint, later: dict[str, tuple[int, ...]]
) -> dict[str, tuple[int, ...]]:
    """The tapes of a run from `checkpoint`: an unfinished request's outputs there, then
    what its queued batch sampled (async), then what it sampled later."""
    batch = checkpoint.pending_batch
    in_flight = dict(batch.sampled_token_ids) if batch is not None else {}
    tapes = dict(later)
    for rc in checkpoint.requests:
        rid = rc.request_id
        tapes[rid] = (*rc.output_token_ids, *in_flight.get(rid, ()), *later.get(rid, ()))
    return tapes


def _request_inputs(
    trace: Trace, arrivals: tuple[int, int], unfinished: list[int]
) -> list[dict[str, Any]]:
    """The recorded inputs by column name (`sql/request_inputs.sql`) of the requests arriving
    at steps `arrivals` (first, last) and of those numbered `unfinished`, the prompts' ints
    shared."""
    first, last = arrivals
    table = trace.sql(query("request_inputs"), [first, unfinished, last]).to_arrow_table()
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
