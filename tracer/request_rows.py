"""A request's `_requests` row: its prompt, sampling parameters and scripted inputs."""

from __future__ import annotations

from stepscope.engine.workload import RequestSpec

from .redact import Redactor


def request_row(
    index: int, request_id: str, spec: RequestSpec, redactor: Redactor | None
) -> dict[str, object]:
    """The row replay reads a request's inputs from; token ids pseudonymized when redacting."""
    params = spec.sampling_params
    prompt = list(spec.prompt_token_ids)
    eos, stops = params.eos_token_id, list(params.stop_token_ids)
    if redactor is not None:
        prompt = redactor.tokens(prompt)
        eos = None if eos is None else redactor.token(eos)
        stops = redactor.tokens(stops)
    return {
        "request_index": index,
        "request_id": request_id,
        "arrival_step": spec.arrival_step,
        "arrival_time": spec.arrival_time,
        "priority": spec.priority,
        "prompt_len": len(prompt),
        "prompt_token_ids": prompt,
        "max_tokens": params.max_tokens,
        "min_tokens": params.min_tokens,
        "eos_token_id": eos,
        "stop_token_ids": stops,
        "abort_step": spec.abort_step,
        "abort_before_update": spec.abort_before_update,
        "temperature": params.temperature,
        "top_k": params.top_k,
        "top_p": params.top_p,
        "seed": params.seed,
        "lora_id": spec.lora_id,
        "grammar_ready_step": spec.grammar_ready_step,
        "draft_mismatch_every": spec.draft_mismatch_every,
        "draft_accept": None if spec.draft_accept is None else list(spec.draft_accept),
    }
