"""`check_stop`: whether the token just appended ends the request, in vLLM's order."""

from __future__ import annotations

from .request import Request, RequestStatus


def check_stop(request: Request, max_model_len: int) -> bool:
    """EOS, then stop token ids, then `max_model_len` / `max_tokens`.

    `min_tokens` does not hold back EOS or stop ids here: vLLM's sampler masks
    them until `min_tokens` outputs exist. In the scheduler it only gates
    repetition detection, which is outside the subset.
    """
    sampling_params = request.sampling_params
    last_token_id = request.output_token_ids[-1]
    if last_token_id == sampling_params.eos_token_id:
        request.status = RequestStatus.FINISHED_STOPPED
        return True
    if last_token_id in sampling_params.stop_token_ids:
        request.status = RequestStatus.FINISHED_STOPPED
        request.stop_reason = last_token_id
        return True
    if request.num_tokens >= max_model_len or len(request.output_token_ids) >= request.max_tokens:
        request.status = RequestStatus.FINISHED_LENGTH_CAPPED
        return True
    return False
