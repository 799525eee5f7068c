"""LoRA adapters as vLLM's scheduler sees them: an id for the `max_loras` gate, a name to hash."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LoRARequest:
    """vLLM's `LoRARequest`: the scheduler reads `lora_int_id`, block hashes the name and path."""

    lora_name: str
    lora_int_id: int
    lora_path: str

    @classmethod
    def for_adapter(cls, lora_id: int) -> LoRARequest:
        """The adapter a workload's `lora_id` names: `lora<id>`, its path too (as the
        scripted vLLM driver names it), two strings as a decoded vLLM request holds them."""
        return cls(lora_name=f"lora{lora_id}", lora_int_id=lora_id, lora_path=f"lora{lora_id}")


def active_loras(lora_requests: Iterable[LoRARequest | None]) -> set[int]:
    """The adapter ids among some requests' (vLLM's `scheduled_loras` before the waiting pass)."""
    return {
        lora_request.lora_int_id
        for lora_request in lora_requests
        if lora_request is not None and lora_request.lora_int_id > 0
    }


def exceeds_max_loras(
    lora_request: LoRARequest | None, scheduled_loras: set[int], max_loras: int
) -> bool:
    """Whether admitting a request of this adapter would bring it past `max_loras` (skipped)."""
    return (
        lora_request is not None
        and len(scheduled_loras) == max_loras
        and lora_request.lora_int_id not in scheduled_loras
    )


def lora_hash_key(lora_request: LoRARequest | None) -> bytes:
    """The adapter's part of every block hash of a request: no prefix hit across adapters.

    vLLM adds `("lora", lora_name, lora_path)` to each block's extra keys; the path
    follows from the name here, so the name alone keeps the same hits.
    """
    if lora_request is None:
        return b""
    return b"lora\0" + lora_request.lora_name.encode()
