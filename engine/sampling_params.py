"""The subset of vLLM's `SamplingParams` that the scheduler and the sampler read."""

from __future__ import annotations

from dataclasses import dataclass

SAMPLING_EPS = 1e-5
"""A temperature below this samples greedily, as in vLLM."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplingParams:
    """How a request stops (`max_tokens`, `min_tokens`, EOS, stop ids) and how it samples.

    `eos_token_id` is None when the request ignores EOS (vLLM's `ignore_eos`).
    `temperature` 0 is greedy; `top_k` 0 keeps every token; `seed` None lets the
    model runner derive one from the request id, so runs stay reproducible.
    """

    max_tokens: int
    min_tokens: int = 0
    eos_token_id: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if self.min_tokens < 0:
            raise ValueError(f"min_tokens must be at least 0, got {self.min_tokens}")
        if self.min_tokens > self.max_tokens:
            raise ValueError(
                f"min_tokens must be at most max_tokens={self.max_tokens}, got {self.min_tokens}"
            )
        if self.temperature < 0:
            raise ValueError(f"temperature must be at least 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be at least 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def is_greedy(self) -> bool:
        return self.temperature < SAMPLING_EPS

    @property
    def all_stop_token_ids(self) -> tuple[int, ...]:
        """EOS (unless ignored) and the stop ids: what `min_tokens` holds back."""
        if self.eos_token_id is None:
            return self.stop_token_ids
        return (self.eos_token_id, *self.stop_token_ids)
