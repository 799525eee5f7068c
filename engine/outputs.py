"""What the model runner returns, and what the engine reports per request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .request import FinishReason


@dataclass(frozen=True, slots=True)
class ModelRunnerOutput:
    """Sampled tokens per scheduled request; a partial prefill chunk samples none.

    With speculative decoding a request gets its accepted drafts, then the bonus token.
    """

    req_ids: Sequence[str]
    req_id_to_index: Mapping[str, int]
    sampled_token_ids: Sequence[Sequence[int]]

    @staticmethod
    def from_sampled(sampled: Mapping[str, Sequence[int]]) -> ModelRunnerOutput:
        req_ids = list(sampled)
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={req_id: index for index, req_id in enumerate(req_ids)},
            sampled_token_ids=[sampled[req_id] for req_id in req_ids],
        )


@dataclass(frozen=True, slots=True)
class DraftTokenIds:
    """Drafts a model runner proposed after a step, per request (vLLM's `DraftTokenIds`)."""

    req_ids: tuple[str, ...]
    draft_token_ids: tuple[tuple[int, ...], ...]


class EngineCoreOutput(NamedTuple):
    """New tokens of one request this step, and its finish reason if it stopped.

    A named tuple: one is made per scheduled request per step, and it builds faster
    than a frozen dataclass.
    """

    request_id: str
    new_token_ids: tuple[int, ...]
    finish_reason: FinishReason | None = None
    stop_reason: int | str | None = None
