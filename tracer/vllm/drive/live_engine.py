"""A real vLLM `LLMEngine` built for a trace's config, in this process, stepped by the caller.

The engine core runs in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`): the
`InprocClient` turns each `LLMEngine.step()` into exactly one `EngineCore.step()`
(one `schedule()`, one forward pass, one `update_from_output()`), so a caller
decides what lands before each step. Request ids are kept as given
(`VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1`; else the input processor appends eight
random characters), so a rerun's requests line up with the trace's by id.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stepscope.engine import EngineConfig, InputError
from stepscope.engine.sampling_params import SamplingParams

OFFLINE_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
"""Any vLLM process stepscope starts (an engine here, a server in the tests): no network."""

LIVE_ENVIRONMENT = {
    **OFFLINE_ENVIRONMENT,
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION": "1",
}
"""Forced before vLLM is imported: one engine core in this process, ids kept, no network."""

CPU_KV_CACHE_GIB = "1"
"""`VLLM_CPU_KVCACHE_SPACE` unless set: the CPU worker then skips its memory-fraction check
(the pool holds `num_blocks` blocks either way, `num_gpu_blocks_override` decides)."""


@dataclass(frozen=True)
class LiveEngineOptions:
    """How to build the engine beyond the trace's scheduler config."""

    model: Path
    dtype: str = "auto"
    device: str = "auto"
    """auto, cpu or cuda: checked against the platform vLLM is installed for."""
    engine_args: Mapping[str, Any] = field(default_factory=dict)
    """More of vLLM's `EngineArgs` (e.g. gpu_memory_utilization, enforce_eager)."""


def prepare_environment() -> None:
    """Set the variables vLLM reads at import and engine start (before importing it)."""
    os.environ.update(LIVE_ENVIRONMENT)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_CACHE_GIB)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


def parse_engine_args(items: list[str]) -> dict[str, Any]:
    """`key=value` pairs (values as JSON where they parse, else strings)."""
    parsed: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--engine-arg {item!r}: expected KEY=VALUE")
        try:
            parsed[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            parsed[key.strip()] = raw
    return parsed


def engine_kwargs(config: EngineConfig, options: LiveEngineOptions) -> dict[str, Any]:
    """vLLM `EngineArgs` for the trace's scheduler and KV cache config."""
    return {
        "model": str(options.model),
        "dtype": options.dtype,
        "seed": 0,
        "block_size": config.block_size,
        "num_gpu_blocks_override": config.num_blocks,
        "max_num_batched_tokens": config.max_num_batched_tokens,
        "max_num_seqs": config.max_num_seqs,
        "max_model_len": config.max_model_len,
        "scheduling_policy": config.policy.value,
        "enable_prefix_caching": config.enable_prefix_caching,
        "enable_chunked_prefill": config.enable_chunked_prefill,
        "long_prefill_token_threshold": config.long_prefill_token_threshold,
        "long_prefill_token_threshold_adaptive": config.long_prefill_token_threshold_adaptive,
        "scheduler_reserve_full_isl": config.scheduler_reserve_full_isl,
        "watermark": config.watermark,
        "max_num_scheduled_tokens": config.max_num_scheduled_tokens,
        "max_num_active_seqs": config.max_num_active_seqs,
        "async_scheduling": config.async_scheduling,
        **options.engine_args,
        **feature_kwargs(config, options.engine_args),
    }


def feature_kwargs(config: EngineConfig, engine_args: Mapping[str, Any]) -> dict[str, Any]:
    """Speculative decoding and LoRA for the trace's config.

    `--engine-arg speculative_config={...}` adds to the method, draft count and parallel
    drafting (an ngram's `prompt_lookup_max`, a draft model); LoRA is served up to `max_loras`
    adapters at once, of rank `max_lora_rank` (vLLM's default unless given).
    """
    kwargs: dict[str, Any] = {}
    if config.num_speculative_tokens > 0:
        kwargs["speculative_config"] = {
            **dict(engine_args.get("speculative_config") or {}),
            "method": config.speculative_method,
            "num_speculative_tokens": config.num_speculative_tokens,
        }
        if config.parallel_drafting:
            kwargs["speculative_config"]["parallel_drafting"] = True
    if config.max_loras is not None:
        kwargs["enable_lora"] = True
        kwargs["max_loras"] = config.max_loras
    return kwargs


def build_engine(config: EngineConfig, options: LiveEngineOptions) -> Any:
    """vLLM's `LLMEngine` with its engine core in this process."""
    prepare_environment()
    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.engine.llm_engine import LLMEngine

    _check_device(options.device)
    try:
        vllm_config = EngineArgs(**engine_kwargs(config, options)).create_engine_config()
    except (TypeError, ValueError) as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()][:3]
        raise InputError(f"vLLM does not take this engine config: {' '.join(lines)}") from None
    engine = LLMEngine.from_vllm_config(vllm_config)
    _check_async(engine, config)
    return engine


def _check_device(device: str) -> None:
    from vllm.platforms import current_platform

    platform = str(current_platform.device_type)
    if device not in ("auto", platform):
        raise InputError(f"--device {device}: this vLLM is installed for {platform}")


def _check_async(engine: Any, config: EngineConfig) -> None:
    """A platform that turns async scheduling off (vLLM's CPU) cannot rerun an async trace."""
    running = bool(engine.vllm_config.scheduler_config.async_scheduling)
    if running != config.async_scheduling:
        shutdown(engine)
        raise InputError(
            f"async_scheduling is {str(config.async_scheduling).lower()} in the trace, but "
            f"this vLLM platform runs it {'on' if running else 'off'}"
        )


def scheduler_of(engine: Any) -> Any:
    """The scheduler inside the in-process engine core."""
    return engine.engine_core.engine_core.scheduler


def engine_dtype(engine: Any) -> str:
    return str(engine.vllm_config.model_config.dtype).removeprefix("torch.")


def seeds_supported() -> bool:
    """vLLM's CPU sampler fails on a per-request seed ("CPU Generator does not use offset")."""
    from vllm.platforms import current_platform

    return not current_platform.is_cpu()


def vllm_sampling_params(params: SamplingParams, *, keep_seed: bool) -> Any:
    """vLLM's `SamplingParams` for a recorded request (EOS comes from the model's tokenizer)."""
    from vllm.sampling_params import SamplingParams as VllmSamplingParams

    return VllmSamplingParams(
        max_tokens=params.max_tokens,
        min_tokens=params.min_tokens,
        ignore_eos=params.eos_token_id is None,
        stop_token_ids=list(params.stop_token_ids),
        temperature=params.temperature,
        top_k=params.top_k if params.top_k > 0 else 0,
        top_p=params.top_p,
        seed=params.seed if keep_seed else None,
    )


def shutdown(engine: Any) -> None:
    engine.engine_core.shutdown()
