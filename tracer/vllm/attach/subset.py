"""What a vLLM run used that stepscope's engine does not model.

The trace records vLLM's decisions whatever they were; these reasons, stored in
`meta.outside_subset`, say why an exact replay through stepscope's engine cannot
be expected to match (replay through vLLM's own scheduler still can).
"""

from __future__ import annotations

from typing import Any

from stepscope.engine import EngineConfig

from .convert import MODELLED_SPECULATIVE_METHODS


def outside_subset(scheduler: Any, config: EngineConfig) -> set[str]:
    """The engine-wide features in use that the subset leaves out.

    `config` is what `convert.engine_config` made of the scheduler's settings.
    """
    vllm_config = scheduler.vllm_config
    reasons = set()
    groups = scheduler.kv_cache_config.kv_cache_groups
    if len(groups) != 1:
        reasons.add(f"{len(groups)} KV cache groups")
    elif type(groups[0].kv_cache_spec).__name__ != "FullAttentionSpec":
        reasons.add(f"KV cache spec {type(groups[0].kv_cache_spec).__name__}")
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
    """The per-request features in use that the subset leaves out (structured output is
    recorded: `grammar_readiness.py` says what of it is not)."""
    reasons = set()
    if request.prompt_token_ids is None:
        reasons.add("prompt embeddings")
    if request.mm_features:
        reasons.add("multimodal inputs")
    if request.pooling_params is not None:
        reasons.add("pooling")
    return reasons
