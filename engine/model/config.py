"""The decoder's shape (Hugging Face Llama names) and the seeded presets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InputError


@dataclass(frozen=True, slots=True)
class Llama3RopeScaling:
    """Llama 3.1's frequency-dependent stretch of the rotary wavelengths."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Sizes of a Llama-architecture decoder; field names follow its `config.json`."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float = 10000.0
    rope_scaling: Llama3RopeScaling | None = None
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 131072

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "intermediate_size",
            "max_position_embeddings",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.head_dim < 2 or self.head_dim % 2:
            raise ValueError(f"head_dim must be even and at least 2, got {self.head_dim}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads {self.num_key_value_heads}"
            )

    @property
    def num_queries_per_kv(self) -> int:
        return self.num_attention_heads // self.num_key_value_heads

    def check_prompt(self, request_id: str, prompt_token_ids: Sequence[int]) -> None:
        """Raise `InputError` naming the request if a token id is outside the vocabulary."""
        for token_id in prompt_token_ids:
            if token_id >= self.vocab_size:
                raise InputError(
                    f"request {request_id!r}: prompt token id {token_id} is not below "
                    f"the model's vocab_size {self.vocab_size}"
                )


PRESETS: dict[str, ModelConfig] = {
    "tiny": ModelConfig(
        vocab_size=32000,
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        intermediate_size=352,
        tie_word_embeddings=True,
    ),
    "small": ModelConfig(
        vocab_size=32000,
        hidden_size=512,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=64,
        intermediate_size=1408,
    ),
    "medium": ModelConfig(
        vocab_size=32000,
        hidden_size=1024,
        num_hidden_layers=16,
        num_attention_heads=16,
        num_key_value_heads=4,
        head_dim=64,
        intermediate_size=2816,
    ),
}
"""Seeded-weight models: `tiny` for CPUs and tests, `small` and `medium` for GPUs."""
