"""A trace config's knob values as a person reads them (info, diff, reports).

Most knobs print as they are; hybrid KV cache groups print as `type:window` in group order
(`full,sliding_window:128`), not as the list of structs the trace stores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def knob_text(name: str, value: Any) -> str:
    """`value` of the knob `name`, in words."""
    if name == "kv_cache_groups" and value is not None:
        return kv_cache_groups_text(value)
    return str(value)


def kv_cache_groups_text(groups: Sequence[Mapping[str, Any]]) -> str:
    """The groups as `type` or `type:window`, comma-separated, in vLLM's group order."""
    return ",".join(map(_group_text, groups))


def _group_text(group: Mapping[str, Any]) -> str:
    window = group.get("sliding_window") or group.get("attention_chunk_size")
    return str(group["type"]) if window is None else f"{group['type']}:{window}"
