"""LoRA adapters as vLLM's scheduler sees them: an id for the `max_loras` gate, a name to hash."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .request import Request


@dataclass(frozen=True, slots=True)
class LoRARequest:
    """vLLM's `LoRARequest`: the scheduler reads only `lora_int_id` and `lora_name`."""

    lora_name: str
    lora_int_id: int

    @classmethod
    def for_adapter(cls, lora_id: int) -> LoRARequest:
        """The adapter a workload's `lora_id` names (`lora<id>`, as the oracle names it)."""
        return cls(lora_name=f"lora{lora_id}", lora_int_id=lora_id)


def active_loras(requests: Iterable[Request]) -> set[int]:
    """The adapter ids among `requests` (vLLM's `scheduled_loras` before the waiting pass)."""
    return {
        request.lora_request.lora_int_id
        for request in requests
        if request.lora_request is not None and request.lora_request.lora_int_id > 0
    }


def exceeds_max_loras(request: Request, scheduled_loras: set[int], max_loras: int) -> bool:
    """Whether admitting `request` would bring a new adapter past `max_loras` (it is skipped)."""
    lora_request = request.lora_request
    return (
        lora_request is not None
        and len(scheduled_loras) == max_loras
        and lora_request.lora_int_id not in scheduled_loras
    )


def lora_hash_key(request: Request) -> bytes:
    """The adapter's part of every block hash of `request`: no prefix hit across adapters.

    vLLM adds `("lora", lora_name, lora_path)` to each block's extra keys; the path
    follows from the name here, so the name alone keeps the same hits.
    """
    lora_request = request.lora_request
    if lora_request is None:
        return b""
    return b"lora\0" + lora_request.lora_name.encode()
