"""What a vLLM run used that stepscope's engine does not model.

The trace records vLLM's decisions whatever they were; these reasons, stored in
`meta.outside_subset`, say why an exact replay through stepscope's engine cannot
be expected to match (replay through vLLM's own scheduler still can).
"""

from __future__ import annotations

from typing import Any

from stepscope.engine import EngineConfig

from .convert import MODELLED_KV_CACHE_SPECS, MODELLED_SPECULATIVE_METHODS, kv_cache_groups


def outside_subset(scheduler: Any, config: EngineConfig) -> set[str]:
    """The engine-wide features in use that the subset leaves out.

    `config` is what `convert.engine_config` made of the scheduler's settings.
    """
    vllm_config = scheduler.vllm_config
    reasons = set()
    reasons.update(kv_cache_groups_outside_subset(scheduler, config))
    reasons.update(_speculative_outside_subset(vllm_config.speculative_config))
    reasons.update(drafting_differences(scheduler, config))
    if scheduler.connector is not None:
        reasons.add("KV connector")
    parallel = vllm_config.parallel_config
    if parallel.pipeline_parallel_size > 1:
        reasons.add("pipeline parallelism")
    if parallel.data_parallel_size > 1:
        reasons.add("data parallelism")
    if scheduler.hash_block_size != scheduler.block_size:
        reasons.add("hash block size differs from block size")
    if scheduler.is_encoder_decoder:
        reasons.add("encoder-decoder model")
    if scheduler.scheduler_config.async_scheduling and not _is_async_class(scheduler):
        # The other way round is a CPU engine: `EngineCore` runs an `AsyncScheduler` in its
        # synchronous loop, where it decides as `Scheduler` does.
        reasons.add("async_scheduling with a synchronous scheduler class")
    return reasons


def kv_cache_groups_outside_subset(scheduler: Any, config: EngineConfig) -> set[str]:
    """KV cache groups the engine does not model, one reason per kind.

    Full, sliding window and chunked local attention are modelled, alone or side by side;
    another spec type (Mamba, cross-attention, ...) is named.
    """
    groups = scheduler.kv_cache_config.kv_cache_groups
    found = (_group_outside_subset(group.kv_cache_spec, scheduler, config) for group in groups)
    reasons = {reason for reason in found if reason is not None}
    if config.kv_cache_groups is None and kv_cache_groups(scheduler.kv_cache_config) is not None:
        reasons.add(
            f"KV cache groups with {config.speculative_method} drafting, "
            "a combination the engine does not model"
        )
    return reasons


def _group_outside_subset(spec: Any, scheduler: Any, config: EngineConfig) -> str | None:
    """Why one group's spec is outside the subset, if it is."""
    name = type(spec).__name__
    if name not in MODELLED_KV_CACHE_SPECS:
        return f"KV cache spec {name}"
    if spec.block_size != scheduler.block_size:
        return (
            f"KV cache group block size {spec.block_size} (the scheduler's: {scheduler.block_size})"
        )
    extra = config.sliding_window_extra_tokens
    if name == "SlidingWindowSpec" and spec.extra_retained_tokens != extra:
        kept = spec.extra_retained_tokens
        return f"{name} with extra_retained_tokens {kept} (the engine's: {extra})"
    return None


def _speculative_outside_subset(speculative: Any) -> set[str]:
    """Draft methods other than those modelled, and per-batch-size draft counts."""
    if speculative is None:
        return set()
    reasons = set()
    if speculative.method not in MODELLED_SPECULATIVE_METHODS:
        reasons.add(f"speculative decoding with method {speculative.method}")
    if getattr(speculative, "num_speculative_tokens_per_batch_size", None):  # 0.33 and later
        reasons.add("num_speculative_tokens_per_batch_size")
    return reasons


def drafting_differences(scheduler: Any, config: EngineConfig) -> set[str]:
    """What the scheduler reserves for drafting that the engine would work out otherwise
    (a knob it does not model, such as `disable_eagle_block_drop`)."""
    if config.num_speculative_tokens == 0:
        return set()
    ours = {
        "num_lookahead_tokens": config.num_lookahead_tokens,
        "max_num_new_slots_for_drafting": config.max_num_new_slots_for_drafting,
        "num_prefill_lookahead": config.num_prefill_lookahead_tokens,
        "num_hash_lookahead_tokens": config.num_hash_lookahead_tokens,
        "use_eagle_block_drop": config.use_eagle_block_drop,
    }
    theirs = {
        "num_lookahead_tokens": scheduler.num_lookahead_tokens,
        "max_num_new_slots_for_drafting": (
            scheduler.vllm_config.speculative_config.max_num_new_slots_for_drafting
        ),
        "num_prefill_lookahead": scheduler.num_prefill_lookahead,
        "num_hash_lookahead_tokens": getattr(scheduler, "num_hash_lookahead_tokens", 0),  # 0.33
        "use_eagle_block_drop": scheduler.use_eagle_block_drop,
    }
    return {
        f"speculative decoding with {name} {theirs[name]} (the engine's: {value})"
        for name, value in ours.items()
        if theirs[name] != value
    }


def _is_async_class(scheduler: Any) -> bool:
    return any(cls.__name__ == "AsyncScheduler" for cls in type(scheduler).__mro__)


def request_outside_subset(request: Any) -> set[str]:
    """The per-request features in use that the subset leaves out."""
    reasons = set()
    if request.prompt_token_ids is None:
        reasons.add("prompt embeddings")
    if request.mm_features:
        reasons.add("multimodal inputs")
    if request.use_structured_output:
        reasons.add("structured output")
    if request.pooling_params is not None:
        reasons.add("pooling")
    return reasons
