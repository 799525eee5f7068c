"""A request as the scheduler sees it: token list, computed-token counter, status."""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from typing import Protocol

from .lora import LoRARequest
from .sampling_params import SamplingParams
from .structured_output import StructuredOutputRequest


class RequestStatus(enum.IntEnum):
    """vLLM's request statuses, in vLLM's order; everything after PREEMPTED is finished."""

    WAITING = enum.auto()
    WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR = enum.auto()
    WAITING_FOR_REMOTE_KVS = enum.auto()
    WAITING_FOR_STREAMING_REQ = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()
    FINISHED_IGNORED = enum.auto()
    FINISHED_ERROR = enum.auto()
    FINISHED_REPETITION = enum.auto()

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def is_finished(status: RequestStatus) -> bool:
        return status > RequestStatus.PREEMPTED

    @staticmethod
    def get_finished_reason(status: RequestStatus) -> FinishReason | None:
        return _FINISHED_REASON.get(status)


class FinishReason(enum.StrEnum):
    """Why a request finished, as vLLM reports it to clients."""

    STOP = "stop"
    LENGTH = "length"
    ABORT = "abort"
    ERROR = "error"
    REPETITION = "repetition"


_FINISHED_REASON = {
    RequestStatus.FINISHED_STOPPED: FinishReason.STOP,
    RequestStatus.FINISHED_LENGTH_CAPPED: FinishReason.LENGTH,
    RequestStatus.FINISHED_ABORTED: FinishReason.ABORT,
    RequestStatus.FINISHED_IGNORED: FinishReason.LENGTH,
    RequestStatus.FINISHED_ERROR: FinishReason.ERROR,
    RequestStatus.WAITING_FOR_STREAMING_REQ: FinishReason.STOP,
    RequestStatus.FINISHED_REPETITION: FinishReason.REPETITION,
}


class BlockHasher(Protocol):
    """Hashes a request's newly full blocks (vLLM's `request_block_hasher`)."""

    block_size: int
    num_hash_lookahead_tokens: int
    """Tokens after each block that its hash covers (a block is hashed once they exist)."""

    def __call__(self, request: Request) -> list[bytes]: ...


@dataclass(frozen=True, slots=True)
class RunningGrant:
    """A running request's `allocate_slots` call that was granted, as a probe is handed it."""

    request_id: str


class Request:
    """Prompt plus outputs so far, and how many of those tokens have KV computed.

    There is no prefill or decode phase: each step `num_computed_tokens` catches
    up with `num_tokens`, a chunk at a time.
    """

    __slots__ = (
        "_block_hasher",
        "_num_tokens_next_block",
        "all_token_ids",
        "arrival_time",
        "block_hashes",
        "is_prefill_chunk",
        "lora_request",
        "max_tokens",
        "num_computed_tokens",
        "num_in_flight_tokens",
        "num_output_placeholders",
        "num_preemptions",
        "num_prompt_tokens",
        "num_stale_output_tokens",
        "num_tokens",
        "output_token_ids",
        "priority",
        "prompt_token_ids",
        "request_id",
        "running_grant",
        "sampling_params",
        "shared_prefix_boundary",
        "spec_token_ids",
        "status",
        "stop_reason",
        "structured_output_request",
    )

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        sampling_params: SamplingParams,
        arrival_time: float,
        priority: int = 0,
        block_hasher: BlockHasher | None = None,
        lora_request: LoRARequest | None = None,
        structured_output_request: StructuredOutputRequest | None = None,
    ) -> None:
        self.request_id = request_id
        self.running_grant = RunningGrant(request_id)
        """What a probe is handed when this request's running call is granted: made once."""
        self.prompt_token_ids = tuple(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.all_token_ids: list[int] = list(prompt_token_ids)
        self.num_tokens = len(prompt_token_ids)
        """`len(all_token_ids)`, kept as a field: the scheduler reads it for every request."""
        self.output_token_ids: list[int] = []
        self.sampling_params = sampling_params
        self.max_tokens = sampling_params.max_tokens
        self.arrival_time = arrival_time
        self.priority = priority
        self.lora_request = lora_request
        self.structured_output_request = structured_output_request
        self.status = (
            RequestStatus.WAITING
            if structured_output_request is None
            else RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR
        )
        self.num_computed_tokens = 0
        self.num_output_placeholders = 0
        """Async scheduling: tokens sampled (or being sampled) whose output has not come back."""
        self.num_in_flight_tokens = 0
        """Scheduled tokens whose step's output has not been processed yet."""
        self.num_stale_output_tokens = 0
        """In-flight tokens of steps scheduled before a preemption: delivered, never counted."""
        self.num_preemptions = 0
        self.is_prefill_chunk = False
        self.shared_prefix_boundary = 0
        """Hybrid groups: the full-attention hit its last lookup found beyond the reconciled
        one, whose window tail it caches so a sibling hits there next (0: none)."""
        self.stop_reason: int | str | None = None
        self.spec_token_ids: list[int] = []
        """Drafts to verify in its next decode step (async: -1 placeholders the worker fills)."""
        self._block_hasher = block_hasher
        self.block_hashes: list[bytes] = []
        self._num_tokens_next_block = sys.maxsize
        """`num_tokens` at which the next block is full and gets hashed (never: no hasher)."""
        self.update_block_hashes()

    @property
    def num_tokens_with_spec(self) -> int:
        return len(self.all_token_ids) + len(self.spec_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    def is_finished(self) -> bool:
        return self.status > RequestStatus.PREEMPTED

    def get_finished_reason(self) -> FinishReason | None:
        return _FINISHED_REASON.get(self.status)

    def append_output_token_id(self, token_id: int) -> None:
        self.output_token_ids.append(token_id)
        self.all_token_ids.append(token_id)
        self.num_tokens += 1
        if self.num_tokens >= self._num_tokens_next_block:
            self.update_block_hashes()

    def update_block_hashes(self) -> None:
        """Hash any block of `all_token_ids` that became full."""
        block_hasher = self._block_hasher
        if block_hasher is not None:
            self.block_hashes.extend(block_hasher(self))
            self._num_tokens_next_block = (
                len(self.block_hashes) + 1
            ) * block_hasher.block_size + block_hasher.num_hash_lookahead_tokens

    def __lt__(self, other: Request) -> bool:
        """The waiting heap's order: priority, then arrival time, then request id.

        vLLM falls back to object identity for equal ids; ids are unique here, so
        the order never depends on memory addresses.
        """
        if self.priority != other.priority:
            return self.priority < other.priority
        if self.arrival_time != other.arrival_time:
            return self.arrival_time < other.arrival_time
        return self.request_id < other.request_id

    def __repr__(self) -> str:
        return (
            f"Request({self.request_id!r}, status={self.status.name}, "
            f"num_computed_tokens={self.num_computed_tokens}, num_tokens={self.num_tokens})"
        )
