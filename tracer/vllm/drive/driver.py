"""vLLM's real scheduler stepped through a workload, recorded: no model, no GPU.

The scheduler is built as vLLM's engine builds it, around a tiny model config
that only supplies `max_model_len`, and stepped by the engine's own step loop
with a scripted model (`scripted_core`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from stepscope.engine import EngineConfig, Workload
from stepscope.engine.kv_cache_groups import AttentionType, KVCacheGroupSpec
from stepscope.engine.tape_drafter import TapeDrafter
from stepscope.tracer.redact import Redactor

from ..attach import versions
from . import grammar
from .draft_configs import config_dir, speculative_config
from .scripted_core import DriverRun, run_scripted

VLLM_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_USE_V2_MODEL_RUNNER": "0",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
    "TOKENIZERS_PARALLELISM": "false",
}
"""Set before vLLM is first imported: CPU platform, V1 model-runner output shape."""

_TINY_MODEL = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "num_hidden_layers": 1,
    "head_dim": 32,
    "max_position_embeddings": 1048576,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "vocab_size": 32000,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
"""A model config for `ModelConfig` to read; no weights or tokenizer are loaded."""


def prepare_environment() -> None:
    for key, value in VLLM_ENVIRONMENT.items():
        os.environ.setdefault(key, value)


def build_scheduler(
    workload: Workload, scheduler_cls: type | None = None, *, log_stats: bool = True
) -> tuple[Any, Any]:
    """vLLM's scheduler for the workload's config, and the block hasher requests need.

    `log_stats` is on as in `vllm serve` (it records request events and prefix-cache
    stats); vLLM's offline `LLM` class turns it off.
    """
    prepare_environment()
    from vllm.v1.core.kv_cache_utils import (
        resolve_cache_hit_alignment_tokens,
        resolve_kv_cache_block_sizes,
    )
    from vllm.v1.structured_output import StructuredOutputManager

    vllm_config = _vllm_config(workload.config)
    kv_cache_config = _kv_cache_config(workload.config, vllm_config)
    block_size, hash_block_size = resolve_kv_cache_block_sizes(kv_cache_config, vllm_config)
    kv_cache_config.hash_block_size = hash_block_size
    kv_cache_config.cache_hit_alignment_tokens = resolve_cache_hit_alignment_tokens(
        kv_cache_config, vllm_config, block_size, hash_block_size
    )
    structured_output_manager = StructuredOutputManager(vllm_config)
    if any(spec.grammar_ready_step is not None for spec in workload.requests):
        vocab_size = vllm_config.model_config.get_vocab_size()
        grammar.install_backend(structured_output_manager, vocab_size)
    scheduler = (scheduler_cls or vllm_config.scheduler_config.get_scheduler_cls())(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        structured_output_manager=structured_output_manager,
        block_size=block_size,
        hash_block_size=hash_block_size,
        log_stats=log_stats,
    )
    return scheduler, _block_hasher(vllm_config, hash_block_size)


def _vllm_config(config: EngineConfig) -> Any:
    """A `VllmConfig` with the engine config's scheduler and cache settings."""
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig

    model_config = ModelConfig(
        model=_tiny_model_dir(),
        skip_tokenizer_init=True,
        dtype="float32",
        seed=0,
        max_model_len=config.max_model_len,
        generation_config="vllm",
    )
    scheduler_config = SchedulerConfig(
        max_num_seqs=config.max_num_seqs,
        max_num_batched_tokens=config.max_num_batched_tokens,
        max_model_len=config.max_model_len,
        is_encoder_decoder=False,
        runner_type=model_config.runner_type,
        is_multimodal_model=False,
        long_prefill_token_threshold=config.long_prefill_token_threshold,
        long_prefill_token_threshold_adaptive=config.long_prefill_token_threshold_adaptive,
        enable_chunked_prefill=config.enable_chunked_prefill,
        policy=config.policy.value,
        async_scheduling=config.async_scheduling,
        scheduler_reserve_full_isl=config.scheduler_reserve_full_isl,
        watermark=config.watermark,
        max_num_scheduled_tokens=config.max_num_scheduled_tokens,
        max_num_active_seqs=config.max_num_active_seqs,
        prefill_schedule_interval=config.prefill_schedule_interval or 1,
    )
    cache_config = CacheConfig(
        block_size=config.block_size,
        enable_prefix_caching=config.enable_prefix_caching,
        prefix_cache_retention_interval=config.prefix_cache_retention_interval,
    )
    vllm_config = VllmConfig(
        scheduler_config=scheduler_config,
        model_config=model_config,
        cache_config=cache_config,
        **_feature_configs(config, model_config),
    )
    # vLLM's CPU platform turns async scheduling off; the scheduler itself runs either way.
    vllm_config.scheduler_config.async_scheduling = config.async_scheduling
    vllm_config.cache_config.num_gpu_blocks = config.num_blocks
    return vllm_config


def _feature_configs(config: EngineConfig, model_config: Any) -> dict[str, Any]:
    """Speculative decoding and LoRA as vLLM's arg parser builds them (no model loaded)."""
    from vllm.config import LoRAConfig, ParallelConfig

    configs: dict[str, Any] = {}
    if config.num_speculative_tokens > 0:
        parallel_config = ParallelConfig()
        configs["speculative_config"] = speculative_config(config, model_config, parallel_config)
        configs["parallel_config"] = parallel_config
    if config.max_loras is not None:
        configs["lora_config"] = LoRAConfig(max_loras=config.max_loras)
    return configs


def _kv_cache_config(config: EngineConfig, vllm_config: Any) -> Any:
    """One group per `kv_cache_groups` entry (one full-attention group without them) over
    one pool of `num_blocks` blocks; the scheduler needs no tensors."""
    from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec

    specs = [_kv_cache_spec(group, config.block_size, vllm_config) for group in _groups(config)]
    eagle_group = _eagle_group(specs, vllm_config)
    return KVCacheConfig(
        num_blocks=config.num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[
            KVCacheGroupSpec(
                [f"model.layers.{index}.self_attn.attn"],
                spec,
                **({"is_eagle_group": True} if index == eagle_group else {}),
            )
            for index, spec in enumerate(specs)
        ],
        prefix_cache_retention_interval=vllm_config.cache_config.prefix_cache_retention_interval,
    )


def _groups(config: EngineConfig) -> tuple[KVCacheGroupSpec, ...]:
    return config.kv_cache_groups or (KVCacheGroupSpec(AttentionType.FULL),)


def _kv_cache_spec(group: KVCacheGroupSpec, block_size: int, vllm_config: Any) -> Any:
    """vLLM's spec of one group: one unit-size layer (the scheduler reads only the type,
    the block size and the window)."""
    import torch
    from vllm.v1.kv_cache_interface import (
        ChunkedLocalAttentionSpec,
        FullAttentionSpec,
        SlidingWindowSpec,
    )

    layer = {"block_size": block_size, "num_kv_heads": 1, "head_size": 1, "dtype": torch.float32}
    if group.type is AttentionType.SLIDING_WINDOW:
        # A multi-module MTP drafter re-reads the tokens below the window (the planner's rule).
        extra = max(0, vllm_config.num_prefill_lookahead_tokens - 1)
        return SlidingWindowSpec(
            **layer, sliding_window=group.sliding_window, extra_retained_tokens=extra
        )
    if group.type is AttentionType.CHUNKED_LOCAL:
        return ChunkedLocalAttentionSpec(**layer, attention_chunk_size=group.attention_chunk_size)
    return FullAttentionSpec(**layer)


def _eagle_group(specs: list[Any], vllm_config: Any) -> int | None:
    """The group holding an EAGLE-style drafter's layers where vLLM drops its last cached
    block: the first full-attention group, as vLLM's planner places them."""
    speculative = vllm_config.speculative_config
    if speculative is None or not speculative.use_eagle_block_drop():
        return None
    full = (index for index, spec in enumerate(specs) if type(spec).__name__ == "FullAttentionSpec")
    return next(full, None)


def _block_hasher(vllm_config: Any, hash_block_size: int) -> Any:
    """What `EngineCore.__init__` hands every request when prefix caching is on."""
    if not vllm_config.cache_config.enable_prefix_caching:
        return None
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import init_none_hash

    hash_fn = get_hash_fn_by_name(vllm_config.cache_config.prefix_caching_hash_algo)
    init_none_hash(hash_fn)
    return versions.request_block_hasher(hash_block_size, hash_fn, vllm_config)


def _tiny_model_dir() -> str:
    return config_dir("stepscope-vllm-tiny-llama", _TINY_MODEL)


def record_with_vllm(
    workload: Workload,
    path: Path,
    scheduler_cls: type | None = None,
    meta: dict[str, str] | None = None,
    redactor: Redactor | None = None,
    drafter: TapeDrafter | None = None,
) -> DriverRun:
    """Run the workload through vLLM's scheduler (or `scheduler_cls`), recorded at `path`.

    `drafter`: the scripted model's drafts and verdicts (default: the workload's scripts).
    """
    from ..attach.start import attach_recording

    scheduler, block_hasher = build_scheduler(workload, scheduler_cls)
    recording = attach_recording(
        scheduler,
        path,
        planned=workload,
        meta={
            "workload": workload.source,
            "description": workload.description,
            "max_steps": str(workload.max_steps),
            "model": "tape",
            "device": "cpu",
            **(meta or {}),
        },
        redactor=redactor,
    )
    finished = False
    try:
        run = run_scripted(workload, scheduler, block_hasher, recording, drafter)
        finished = True
    finally:
        recording.close(finished=finished)
    return run
