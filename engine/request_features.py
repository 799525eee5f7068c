"""A request's optional-feature keys (LoRA adapter, draft script, grammar wait), validated.

They only make sense with the matching engine knob: `lora_id` needs `max_loras`, the
draft script needs `num_speculative_tokens`. The draft script is what the tape model's
fake drafter follows, as the oracle's does: `draft_accept[j]` drafts are right at the
j-th verification of real drafts (k after the list), else every
`draft_mismatch_every`-th output is mispredicted; `draft_accept` wins when both are set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .config import EngineConfig


class _Arrives(Protocol):
    @property
    def arrival_step(self) -> int: ...


SpecT = TypeVar("SpecT", bound=_Arrives)

REQUEST_FEATURE_KEYS = frozenset(
    {"lora_id", "draft_mismatch_every", "draft_accept", "grammar_ready_step"}
)


class FeatureError(ValueError):
    """A bad feature key: `key` names it, `message` says what is wrong."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


@dataclass(frozen=True, slots=True)
class RequestFeatures:
    lora_id: int | None = None
    draft_mismatch_every: int | None = None
    draft_accept: tuple[int, ...] | None = None
    grammar_ready_step: int | None = None


def with_features(spec: SpecT, item: Mapping[str, Any], config: EngineConfig) -> SpecT:
    """A workload's `RequestSpec` with the feature keys of its JSON object, checked."""
    if REQUEST_FEATURE_KEYS.isdisjoint(item):
        return spec
    features = request_features(item, config, spec.arrival_step)
    return dataclasses.replace(spec, **dataclasses.asdict(features))  # type: ignore[type-var]


def request_features(
    item: Mapping[str, Any], config: EngineConfig, arrival_step: int
) -> RequestFeatures:
    """The feature keys of one request's JSON object (absent keys: None)."""
    lora_id = _optional_int(item, "lora_id", 1)
    if lora_id is not None and config.max_loras is None:
        raise FeatureError("lora_id", "needs config max_loras (LoRA is off)")
    mismatch_every = _optional_int(item, "draft_mismatch_every", 1)
    accept = _draft_accept(item.get("draft_accept"), config.num_speculative_tokens)
    for key, value in (("draft_mismatch_every", mismatch_every), ("draft_accept", accept)):
        if value is not None and config.num_speculative_tokens == 0:
            raise FeatureError(key, "needs config num_speculative_tokens (spec decoding is off)")
    return RequestFeatures(
        lora_id=lora_id,
        draft_mismatch_every=mismatch_every,
        draft_accept=accept,
        grammar_ready_step=_optional_int(item, "grammar_ready_step", arrival_step),
    )


def _optional_int(item: Mapping[str, Any], key: str, minimum: int) -> int | None:
    value = item.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FeatureError(key, f"expected an integer, got {value!r}")
    if value < minimum:
        raise FeatureError(key, f"must be at least {minimum}, got {value}")
    return value


def _draft_accept(value: Any, num_speculative_tokens: int) -> tuple[int, ...] | None:
    """Accepted drafts per verification, each in [0, k]."""
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise FeatureError("draft_accept", "expected a list of accepted-draft counts")
    for position, count in enumerate(value):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise FeatureError("draft_accept", f"item {position} is not a count: {count!r}")
        if num_speculative_tokens and count > num_speculative_tokens:
            raise FeatureError(
                "draft_accept",
                f"item {position} accepts {count} drafts, longer than possible "
                f"(num_speculative_tokens {num_speculative_tokens})",
            )
    return tuple(value)
