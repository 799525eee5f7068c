"""What one `schedule()` call hands the model runner (vLLM's `SchedulerOutput`).

Block ids are group 0's flat tuple; a hybrid model's other groups ride beside them.
Every field is a snapshot: nothing here aliases live scheduler state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .sampling_params import SamplingParams


@dataclass(frozen=True, slots=True)
class NewRequestData:
    """A request scheduled for the first time: its prompt and whole block table."""

    req_id: str
    prompt_token_ids: tuple[int, ...]
    sampling_params: SamplingParams
    block_ids: tuple[int, ...]
    num_computed_tokens: int
    """The prefix-cache hit, i.e. computed tokens before this step."""


@dataclass(frozen=True, slots=True)
class CachedRequestData:
    """Running requests scheduled again, then re-admitted (resumed) ones, column-wise."""

    req_ids: tuple[str, ...]
    resumed_req_ids: frozenset[str]
    new_block_ids: tuple[tuple[int, ...] | None, ...]
    """Blocks added this step (None when none); a resumed request's whole table."""
    num_computed_tokens: tuple[int, ...]
    """Computed tokens before this step."""
    num_output_tokens: tuple[int, ...]
    all_token_ids: Mapping[str, tuple[int, ...]]
    """Full token list of each request that was not scheduled in the previous step."""

    @staticmethod
    def empty() -> CachedRequestData:
        return CachedRequestData((), frozenset(), (), (), (), {})


GroupBlockIds = tuple[tuple[int, ...], ...]
"""One tuple of block ids per KV cache group (0: a null entry)."""

NO_GROUP_BLOCK_IDS: Mapping[str, GroupBlockIds] = MappingProxyType({})
"""`new_block_ids_by_group` of a run with one KV cache group (the flat ids say it all)."""

NO_SPEC_DECODE_TOKENS: Mapping[str, tuple[int, ...]] = MappingProxyType({})
"""`scheduled_spec_decode_tokens` of a step that verifies no drafts."""


@dataclass(frozen=True, slots=True)
class SchedulerOutput:
    scheduled_new_reqs: tuple[NewRequestData, ...]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: Mapping[str, int]
    """Tokens per request in vLLM's order: running requests, then admissions."""
    total_num_scheduled_tokens: int
    preempted_req_ids: frozenset[str]
    """Preempted since the previous `schedule()`, this one included."""
    finished_req_ids: frozenset[str]
    """Finished or aborted since the previous `schedule()` (shipped one step late)."""
    scheduled_spec_decode_tokens: Mapping[str, tuple[int, ...]] = field(
        default_factory=lambda: NO_SPEC_DECODE_TOKENS
    )
    """Drafts to verify per request (-1: padding, or an async placeholder the worker fills)."""
    new_block_ids_by_group: Mapping[str, GroupBlockIds] = field(
        default_factory=lambda: NO_GROUP_BLOCK_IDS
    )
    """Hybrid KV cache groups only: per scheduled request, every group's new blocks (a new
    or resumed request: its whole tables); the flat ids above are group 0's."""
