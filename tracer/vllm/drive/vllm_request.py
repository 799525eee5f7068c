"""vLLM's `Request` for a workload request, as vLLM's input processor would make it."""

from __future__ import annotations

from typing import Any

from stepscope.engine.workload import RequestSpec

from . import grammar


def make_request(spec: RequestSpec, block_hasher: Any) -> Any:
    """vLLM's `Request` for a workload request, as the input processor would make it."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    params = spec.sampling_params
    extra: dict[str, Any] = {}
    if params.min_tokens:
        extra["min_tokens"] = params.min_tokens
    if params.stop_token_ids:
        extra["stop_token_ids"] = list(params.stop_token_ids)
    if params.top_k:
        extra["top_k"] = params.top_k
    if params.seed is not None:
        extra["seed"] = params.seed
    if spec.grammar_ready_step is not None:
        extra["structured_outputs"] = grammar.structured_outputs_params()
    sampling = SamplingParams(
        max_tokens=params.max_tokens,
        ignore_eos=params.eos_token_id is None,
        temperature=params.temperature,
        top_p=params.top_p,
        **extra,
    )
    sampling.update_from_generation_config({}, eos_token_id=params.eos_token_id)
    return Request(
        request_id=spec.request_id,
        prompt_token_ids=list(spec.prompt_token_ids),
        sampling_params=sampling,
        pooling_params=None,
        arrival_time=spec.arrival_time,
        priority=spec.priority,
        block_hasher=block_hasher,
        lora_request=_lora_request(spec.lora_id),
    )


def _lora_request(lora_id: int | None) -> Any:
    """The adapter a request names: the scheduler reads only `lora_int_id`."""
    if lora_id is None:
        return None
    from vllm.lora.request import LoRARequest

    return LoRARequest(lora_name=f"lora{lora_id}", lora_int_id=lora_id, lora_path=f"lora{lora_id}")
