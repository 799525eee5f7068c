"""vLLM's objects as stepscope's: the config, a request, a SchedulerOutput, a step's outputs.

Each conversion is a snapshot taken when vLLM hands the object over: vLLM reuses
and mutates its own lists afterwards. The flat block ids are those of KV cache group 0;
a hybrid model's groups (full, sliding window, chunked local) ride beside them, as
stepscope's engine keeps them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from stepscope.engine import EngineConfig, SamplingParams
from stepscope.engine.block_hash import VLLM_HASHERS, vllm_hasher_name
from stepscope.engine.config import SPECULATIVE_METHODS
from stepscope.engine.errors import ConfigError
from stepscope.engine.kv_cache_groups import AttentionType, KVCacheGroupSpec
from stepscope.engine.outputs import DraftTokenIds, EngineCoreOutput, ModelRunnerOutput
from stepscope.engine.request import FinishReason
from stepscope.engine.scheduler_output import (
    NO_GROUP_BLOCK_IDS,
    CachedRequestData,
    GroupBlockIds,
    NewRequestData,
    SchedulerOutput,
)
from stepscope.engine.workload import RequestSpec

from . import versions


def engine_config(scheduler: Any) -> EngineConfig:
    """The knobs of a live vLLM scheduler, as stepscope's engine takes them (validated).

    Raises `UnsupportedVllmVersion` when the installed vLLM is not one stepscope records.
    KV cache groups the engine cannot run with the other settings (the EAGLE last-block
    drop across groups) are left out, and flagged by `subset`.
    """
    values = _engine_values(scheduler)
    try:
        return EngineConfig.from_dict(values)
    except ConfigError as error:
        if error.key not in KV_CACHE_GROUP_KNOBS:
            raise
    return EngineConfig.from_dict({k: values[k] for k in values if k not in KV_CACHE_GROUP_KNOBS})


KV_CACHE_GROUP_KNOBS = ("kv_cache_groups", "prefix_cache_retention_interval")


def _engine_values(scheduler: Any) -> dict[str, Any]:
    """The scheduler's settings under the engine config's names."""
    scheduler_config = scheduler.scheduler_config
    return {
        "block_size": scheduler.block_size,
        "num_blocks": scheduler.kv_cache_config.num_blocks,
        "max_num_batched_tokens": scheduler_config.max_num_batched_tokens,
        "max_num_seqs": scheduler_config.max_num_seqs,
        "max_model_len": scheduler.max_model_len,
        "policy": scheduler.policy.value,
        "enable_prefix_caching": bool(scheduler.cache_config.enable_prefix_caching),
        "enable_chunked_prefill": bool(scheduler_config.enable_chunked_prefill),
        "long_prefill_token_threshold": scheduler_config.long_prefill_token_threshold,
        "long_prefill_token_threshold_adaptive": bool(
            scheduler_config.long_prefill_token_threshold_adaptive
        ),
        "scheduler_reserve_full_isl": bool(scheduler_config.scheduler_reserve_full_isl),
        "watermark": float(scheduler_config.watermark),
        "max_num_scheduled_tokens": _max_num_scheduled_tokens(scheduler),
        "max_num_active_seqs": scheduler_config.max_num_active_seqs,
        "async_scheduling": bool(scheduler_config.async_scheduling),
        "vllm_version": versions.recorded_version(),
        **kv_cache_group_settings(scheduler.kv_cache_config),
        **feature_settings(scheduler.vllm_config),
        **block_hasher_settings(scheduler.vllm_config),
    }


def _max_num_scheduled_tokens(scheduler: Any) -> int | None:
    """The knob as set, unset where vLLM filled it in: with drafts on it sets the budget."""
    scheduler_config = scheduler.scheduler_config
    value = scheduler_config.max_num_scheduled_tokens
    filled_in = scheduler.vllm_config.speculative_config is not None
    return None if filled_in and value == scheduler_config.max_num_batched_tokens else value


MODELLED_KV_CACHE_SPECS = {
    "FullAttentionSpec": AttentionType.FULL,
    "MLAAttentionSpec": AttentionType.FULL,
    "SlidingWindowSpec": AttentionType.SLIDING_WINDOW,
    "ChunkedLocalAttentionSpec": AttentionType.CHUNKED_LOCAL,
}
"""vLLM's KV cache spec classes stepscope's engine models, by exact class name. MLA's
(DeepSeek) is full attention to the scheduler: vLLM's `KVCacheSpecRegistry` gives it the
`FullAttentionManager`. Another subclass keeps its own name and is not modelled."""


def kv_cache_group_settings(kv_cache_config: Any) -> dict[str, Any]:
    """The KV cache groups and the retention interval as the engine config takes them.

    One full-attention group is the engine's default and is left out; groups the engine
    does not model are left out here and flagged by `subset`.
    """
    settings: dict[str, Any] = {
        "prefix_cache_retention_interval": kv_cache_config.prefix_cache_retention_interval
    }
    groups = kv_cache_groups(kv_cache_config)
    if groups is not None:
        settings["kv_cache_groups"] = groups
    return settings


def kv_cache_groups(kv_cache_config: Any) -> tuple[KVCacheGroupSpec, ...] | None:
    """Each group's attention type and window, in vLLM's order; None for one full-attention
    group, or when a group's spec is not one the engine models."""
    specs = [group.kv_cache_spec for group in kv_cache_config.kv_cache_groups]
    if any(type(spec).__name__ not in MODELLED_KV_CACHE_SPECS for spec in specs):
        return None
    groups = tuple(map(_kv_cache_group, specs))
    return None if groups == (KVCacheGroupSpec(AttentionType.FULL),) else groups


def _kv_cache_group(spec: Any) -> KVCacheGroupSpec:
    attention = MODELLED_KV_CACHE_SPECS[type(spec).__name__]
    if attention is AttentionType.SLIDING_WINDOW:
        return KVCacheGroupSpec(attention, sliding_window=int(spec.sliding_window))
    if attention is AttentionType.CHUNKED_LOCAL:
        return KVCacheGroupSpec(attention, attention_chunk_size=int(spec.attention_chunk_size))
    return KVCacheGroupSpec(attention)


MODELLED_SPECULATIVE_METHODS = SPECULATIVE_METHODS
"""The draft methods whose slots and lookahead stepscope's engine models."""


def feature_settings(vllm_config: Any) -> dict[str, Any]:
    """Speculative decoding, LoRA and the prefill cadence as the engine config takes them
    (only the keys in use).

    A draft method the engine does not model is left out here and flagged by `subset`.
    """
    settings = speculative_settings(vllm_config.speculative_config)
    if vllm_config.lora_config is not None:
        settings["max_loras"] = int(vllm_config.lora_config.max_loras)
    interval = vllm_config.scheduler_config.prefill_schedule_interval
    if interval > 1:  # 1, vLLM's default, holds nothing
        settings["prefill_schedule_interval"] = int(interval)
    return settings


def speculative_settings(speculative: Any) -> dict[str, Any]:
    """The draft method, its drafts per step and the EAGLE-style knobs (`SpeculativeConfig`)."""
    if speculative is None or speculative.method not in MODELLED_SPECULATIVE_METHODS:
        return {}
    settings: dict[str, Any] = {
        "num_speculative_tokens": int(speculative.num_speculative_tokens),
        "speculative_method": speculative.method,
    }
    if speculative.parallel_drafting:
        settings["parallel_drafting"] = True
    if getattr(speculative, "disable_lookahead_block_hashes", False):  # 0.33 and later
        settings["disable_lookahead_block_hashes"] = True
    if speculative.method == "mtp":
        settings["mtp_num_modules"] = mtp_num_modules(speculative)
    return settings


def mtp_num_modules(speculative: Any) -> int:
    """An MTP drafter's modules, as vLLM's `use_multi_module_mtp` reads them."""
    draft = speculative.draft_model_config
    hf_config = None if draft is None else draft.hf_config
    return int(getattr(hf_config, "num_nextn_predict_layers", 1))


def block_hasher_settings(vllm_config: Any) -> dict[str, Any]:
    """vLLM's block hashing as the engine config takes it: its algorithm and NONE_HASH.

    Without prefix caching no block is hashed (stepscope's hasher stands). An xxhash
    algorithm is named without its NONE_HASH: the engine cannot compute those hashes, and
    that NONE_HASH is the secret that keeps them collision-resistant.
    """
    cache_config = vllm_config.cache_config
    if not cache_config.enable_prefix_caching:
        return {}
    algo = str(cache_config.prefix_caching_hash_algo)
    block_hasher = vllm_hasher_name(algo)
    if block_hasher not in VLLM_HASHERS:
        return {"block_hasher": block_hasher}
    return {"block_hasher": block_hasher, "none_hash": none_hash(algo).hex()}


def none_hash(prefix_caching_hash_algo: str) -> bytes:
    """The `NONE_HASH` vLLM's `init_none_hash` sets (or has set) for a SHA-256 algorithm.

    A recording starts in the scheduler's constructor, before `EngineCore` calls
    `init_none_hash`; for SHA-256 its seed is `PYTHONHASHSEED` or a fixed default, so
    this is the value it sets.
    """
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import resolve_none_hash_seed

    hash_fn = get_hash_fn_by_name(prefix_caching_hash_algo)
    return bytes(hash_fn(resolve_none_hash_seed(hash_fn)))


def request_spec(request: Any, arrival_step: int) -> RequestSpec:
    """What the trace keeps of a request when it reaches the scheduler."""
    params = request.sampling_params
    top_k = params.top_k if params.top_k and params.top_k > 0 else 0
    sampling = SamplingParams(
        max_tokens=request.max_tokens,
        min_tokens=params.min_tokens,
        eos_token_id=params.eos_token_id,
        stop_token_ids=tuple(params.stop_token_ids or ()),
        temperature=float(params.temperature),
        top_k=top_k,
        top_p=float(params.top_p),
        seed=params.seed,
    )
    return RequestSpec(
        request_id=request.request_id,
        arrival_step=arrival_step,
        arrival_time=float(request.arrival_time),
        prompt_token_ids=tuple(request.prompt_token_ids or ()),
        output_token_ids=(),
        sampling_params=sampling,
        priority=request.priority,
        lora_id=lora_id(request),
    )


def with_planned(spec: RequestSpec, planned: RequestSpec) -> RequestSpec:
    """What only a scripted workload knows up front: aborts, draft script, grammar compiles.

    A live server learns aborts as they land (the abort events carry them either way);
    grammars compile in the background.
    """
    return dataclasses.replace(
        spec,
        abort_step=planned.abort_step,
        abort_before_update=planned.abort_before_update,
        draft_mismatch_every=planned.draft_mismatch_every,
        draft_accept=planned.draft_accept,
        grammar_ready_step=planned.grammar_ready_step,
    )


def lora_id(request: Any) -> int | None:
    """The adapter a request runs with (`lora_int_id`, what the scheduler gates on)."""
    lora_request = request.lora_request
    return None if lora_request is None else int(lora_request.lora_int_id)


def scheduler_output(
    output: Any,
    sampling: Mapping[str, SamplingParams],
    admitted_before: set[str],
    kv_cache_groups: Sequence[KVCacheGroupSpec] | None,
    spec_tokens: Mapping[str, Sequence[int]],
    block_tables: Mapping[str, GroupBlockIds | None],
) -> SchedulerOutput:
    """vLLM's SchedulerOutput in the V1 model runner's shape.

    The V2 runner ships resumed requests among the new ones; a request admitted
    before is moved back to the resumed rows, so both runners record alike.
    `admitted_before` is updated with this step's first admissions. With
    `kv_cache_groups` (the engine config's) every group's block ids ride beside group 0's.
    `spec_tokens`: the drafts it scheduled as `schedule()` returned them
    (`scheduled_spec_tokens`, or the output's own where vLLM does not change them).
    `block_tables`: new and resumed requests' block ids as `schedule()` returned them
    (`handed_block_tables`: the model runner extends vLLM's lists later).
    """
    cached = output.scheduled_cached_reqs
    new_rows = []
    resumed_rows = []
    for data in output.scheduled_new_reqs:
        block_ids = _group0(block_tables[data.req_id])
        if data.req_id in admitted_before:
            resumed_rows.append((data.req_id, block_ids, data.num_computed_tokens))
            continue
        admitted_before.add(data.req_id)
        new_rows.append(
            NewRequestData(
                req_id=data.req_id,
                prompt_token_ids=tuple(data.prompt_token_ids or ()),
                sampling_params=sampling[data.req_id],
                block_ids=block_ids,
                num_computed_tokens=data.num_computed_tokens,
            )
        )
    return SchedulerOutput(
        scheduled_new_reqs=tuple(new_rows),
        scheduled_cached_reqs=_cached_rows(cached, resumed_rows, block_tables),
        num_scheduled_tokens=dict(output.num_scheduled_tokens),
        total_num_scheduled_tokens=output.total_num_scheduled_tokens,
        preempted_req_ids=frozenset(output.preempted_req_ids or ()),
        finished_req_ids=frozenset(output.finished_req_ids),
        scheduled_spec_decode_tokens={
            req_id: tuple(tokens) for req_id, tokens in spec_tokens.items()
        },
        new_block_ids_by_group=(
            NO_GROUP_BLOCK_IDS
            if kv_cache_groups is None
            else new_block_ids_by_group(output, len(kv_cache_groups), block_tables)
        ),
    )


def scheduled_spec_tokens(output: Any) -> dict[str, tuple[int, ...]]:
    """A copy of the drafts a `SchedulerOutput` schedules: under async scheduling vLLM
    writes the drafts proposed later into its lists (`update_draft_token_ids_in_output`)."""
    return {
        req_id: tuple(tokens)
        for req_id, tokens in (output.scheduled_spec_decode_tokens or {}).items()
    }


def handed_block_tables(output: Any) -> dict[str, GroupBlockIds | None]:
    """Copies of the block-id lists a `SchedulerOutput` hands the model runner to keep as
    its own: a new request's tables and a resumed one's (the runner extends those very lists
    as the request grows)."""
    tables = {data.req_id: _copy_tables(data.block_ids) for data in output.scheduled_new_reqs}
    cached = output.scheduled_cached_reqs
    resumed = cached.resumed_req_ids
    if resumed:
        for req_id, blocks in zip(cached.req_ids, cached.new_block_ids, strict=True):
            if req_id in resumed:
                tables[req_id] = _copy_tables(blocks)
    return tables


def _copy_tables(block_ids: Any) -> GroupBlockIds | None:
    return None if block_ids is None else tuple(map(tuple, block_ids))


def new_block_ids_by_group(
    output: Any, num_groups: int, block_tables: Mapping[str, GroupBlockIds | None]
) -> dict[str, GroupBlockIds]:
    """Every scheduled request's new block ids in each group (a new or resumed request: its
    whole tables, null entries as block 0, from `block_tables`), in scheduling order."""
    cached = output.scheduled_cached_reqs
    tables = dict(zip(cached.req_ids, cached.new_block_ids, strict=True))
    tables.update(block_tables)
    none: GroupBlockIds = ((),) * num_groups
    return {
        req_id: none if tables[req_id] is None else tuple(map(tuple, tables[req_id]))
        for req_id in output.num_scheduled_tokens
    }


def _cached_rows(
    cached: Any,
    resumed_rows: list[tuple[str, tuple[int, ...], int]],
    block_tables: Mapping[str, GroupBlockIds | None],
) -> CachedRequestData:
    req_ids = list(cached.req_ids)
    if not req_ids and not resumed_rows:
        return CachedRequestData.empty()
    resumed = set(cached.resumed_req_ids)
    # None where group 0 gained no block, though another group did.
    new_block_ids: list[tuple[int, ...] | None] = [
        None if blocks is None else _group0(blocks) or None
        for blocks in (
            block_tables.get(req_id, blocks)
            for req_id, blocks in zip(req_ids, cached.new_block_ids, strict=True)
        )
    ]
    num_computed = list(cached.num_computed_tokens)
    num_output = list(cached.num_output_tokens)
    for req_id, block_ids, computed in resumed_rows:
        req_ids.append(req_id)
        resumed.add(req_id)
        new_block_ids.append(block_ids)
        num_computed.append(computed)
        num_output.append(0)
    return CachedRequestData(
        req_ids=tuple(req_ids),
        resumed_req_ids=frozenset(resumed),
        new_block_ids=tuple(new_block_ids),
        num_computed_tokens=tuple(num_computed),
        num_output_tokens=tuple(num_output),
        all_token_ids={
            req_id: tuple(tokens) for req_id, tokens in (cached.all_token_ids or {}).items()
        },
    )


def _group0(block_ids: Any) -> tuple[int, ...]:
    """Group 0's block ids from vLLM's per-group tuple of lists."""
    return tuple(block_ids[0]) if block_ids else ()


def model_runner_output(output: Any) -> ModelRunnerOutput:
    req_ids = list(output.req_ids)
    sampled = output.sampled_token_ids
    return ModelRunnerOutput(
        req_ids=req_ids,
        req_id_to_index=dict(output.req_id_to_index),
        sampled_token_ids=list(map(list, sampled)) if sampled else [[] for _ in req_ids],
    )


def draft_token_ids(drafts: Any) -> DraftTokenIds:
    """What `update_draft_token_ids` was handed (the drafter's lists, snapshotted)."""
    return DraftTokenIds(
        req_ids=tuple(drafts.req_ids),
        draft_token_ids=tuple(tuple(int(t) for t in tokens) for tokens in drafts.draft_token_ids),
    )


def finished_outputs(outputs: Mapping[int, Any]) -> tuple[EngineCoreOutput, ...]:
    """The outputs of one `update_from_output()` that finished a request, in client order.

    The recorder takes new tokens from the model's output; only finishes need these.
    """
    return tuple(
        _output(output)
        for client in sorted(outputs)
        for output in _outputs_of(outputs[client])
        if output.finish_reason is not None
    )


def token_outputs(outputs: Mapping[int, Any]) -> tuple[EngineCoreOutput, ...]:
    """Every output of one `update_from_output()` that appended tokens or finished.

    With speculative decoding the recorder needs each step's appended tokens, which a
    stop among the accepted drafts cuts short of what the model sampled.
    """
    return tuple(
        _output(output)
        for client in sorted(outputs)
        for output in _outputs_of(outputs[client])
        if output.new_token_ids or output.finish_reason is not None
    )


def _output(output: Any) -> EngineCoreOutput:
    return EngineCoreOutput(
        request_id=output.request_id,
        new_token_ids=tuple(int(token) for token in output.new_token_ids),
        finish_reason=_finish_reason(output.finish_reason),
        stop_reason=output.stop_reason,
    )


def _outputs_of(client_outputs: Any) -> Iterable[Any]:
    return client_outputs.outputs if client_outputs is not None else ()


def _finish_reason(reason: Any) -> FinishReason | None:
    return None if reason is None else FinishReason(str(reason))
