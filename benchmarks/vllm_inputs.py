"""What the vLLM-side benchmark workers feed vLLM's scheduler (run under vLLM's venv)."""

from __future__ import annotations

from typing import Any

from stepscope.engine import Workload
from stepscope.tracer.vllm.drive.vllm_request import make_request


def runner_output(sampled: dict[str, list[int]]) -> Any:
    """vLLM's `ModelRunnerOutput` for the fake model's sampled tokens."""
    from vllm.v1.outputs import ModelRunnerOutput

    req_ids = list(sampled)
    return ModelRunnerOutput(
        req_ids=req_ids,
        req_id_to_index={req_id: i for i, req_id in enumerate(req_ids)},
        sampled_token_ids=[sampled[req_id] for req_id in req_ids],
    )


def draft_token_ids(req_ids: list[str], drafts: list[list[int]]) -> Any:
    """vLLM's `DraftTokenIds`, as the model runner hands them to `update_draft_token_ids`."""
    from vllm.v1.outputs import DraftTokenIds

    return DraftTokenIds(req_ids=req_ids, draft_token_ids=drafts)


def arrivals(workload: Workload, block_hasher: Any) -> dict[int, list[Any]]:
    """vLLM requests by the step they arrive at."""
    by_step: dict[int, list[Any]] = {}
    for spec in workload.requests:
        by_step.setdefault(spec.arrival_step, []).append(make_request(spec, block_hasher))
    return by_step
