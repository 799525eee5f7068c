"""KV cache groups of a hybrid model: one attention type per group (vLLM's `KVCacheConfig`).

The workload key `kv_cache_groups` lists them in vLLM's group order, for example
`[{"type": "full"}, {"type": "sliding_window", "sliding_window": 128}]`. All groups
share the engine's `block_size` and draw from one block pool.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

KEY = "kv_cache_groups"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class AttentionType(enum.StrEnum):
    """The attention of a KV cache group's layers (vLLM's spec classes)."""

    FULL = "full"
    SLIDING_WINDOW = "sliding_window"
    """`SlidingWindowSpec`: each token attends to the `sliding_window` tokens up to it."""
    CHUNKED_LOCAL = "chunked_local"
    """`ChunkedLocalAttentionSpec`: each token attends within its `attention_chunk_size` chunk."""


_SIZE_KEY = {
    AttentionType.SLIDING_WINDOW: "sliding_window",
    AttentionType.CHUNKED_LOCAL: "attention_chunk_size",
}
"""The size key each windowed type needs (in tokens)."""


@dataclass(frozen=True, slots=True)
class KVCacheGroupSpec:
    """One KV cache group: its attention type and, for a windowed type, the window in tokens."""

    type: AttentionType
    sliding_window: int | None = None
    attention_chunk_size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type.value}
        size_key = _SIZE_KEY.get(self.type)
        if size_key is not None:
            out[size_key] = getattr(self, size_key)
        return out

    def max_admission_blocks_per_request(
        self, block_size: int, max_in_flight_tokens: int, max_model_len: int, extra: int
    ) -> int | None:
        """The blocks the full-prompt gate counts at most for one request (None: no cap).

        Out-of-window blocks are freed between chunks, so a windowed group never holds
        more than its window plus the tokens in flight.
        """
        if self.type is AttentionType.SLIDING_WINDOW:
            assert self.sliding_window is not None
            window = self.sliding_window - 1 + extra + max_in_flight_tokens
            return cdiv(min(window, max_model_len), block_size) + 1
        if self.type is AttentionType.CHUNKED_LOCAL:
            assert self.attention_chunk_size is not None
            chunk = self.attention_chunk_size + max_in_flight_tokens
            return cdiv(min(chunk, max_model_len), block_size)
        return None


def parse_kv_cache_groups(raw: Any) -> tuple[KVCacheGroupSpec, ...]:
    """The groups of a workload's `kv_cache_groups` list; a bad entry is a `ConfigError`."""
    if isinstance(raw, tuple) and all(isinstance(g, KVCacheGroupSpec) for g in raw):
        return raw
    if not isinstance(raw, list | tuple) or not raw:
        raise ConfigError(KEY, f"expected a non-empty list of groups, got {raw!r}")
    return tuple(_parse_group(index, entry) for index, entry in enumerate(raw))


def _parse_group(index: int, entry: Any) -> KVCacheGroupSpec:
    where = f"group {index}"
    if not isinstance(entry, dict):
        raise ConfigError(KEY, f"{where}: expected an object, got {entry!r}")
    try:
        kind = AttentionType(str(entry.get("type")))
    except ValueError:
        known = ", ".join(t.value for t in AttentionType)
        raise ConfigError(
            KEY, f"{where}: type {entry.get('type')!r} is not one of {known}"
        ) from None
    size_key = _SIZE_KEY.get(kind)
    allowed = {"type"} if size_key is None else {"type", size_key}
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ConfigError(KEY, f"{where}: unknown key {unknown[0]!r} for type {kind.value}")
    if size_key is None:
        return KVCacheGroupSpec(kind)
    size = entry.get(size_key)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ConfigError(KEY, f"{where}: {size_key} must be an integer >= 1, got {size!r}")
    return KVCacheGroupSpec(kind, **{size_key: size})


def groups_to_json(groups: Sequence[KVCacheGroupSpec]) -> list[dict[str, Any]]:
    return [group.to_dict() for group in groups]
