"""Each KV cache group's held blocks in a vLLM scheduler, read right after `schedule()`.

Every group draws from one block pool, so the pool's free count is theirs together; a
group's own share is the distinct blocks in its manager's `req_to_blocks` (the engine's
`KVCacheCoordinator.get_num_held_blocks_by_group` counts them alike).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any


def held_blocks_counter(scheduler: Any) -> Callable[[], tuple[int, ...]] | None:
    """How to count the blocks each KV cache group's requests hold (None: one group, where
    nothing is counted)."""
    managers = tuple(scheduler.kv_cache_manager.coordinator.single_type_managers)
    if len(managers) < 2:
        return None
    return lambda: tuple(num_held_blocks(manager.req_to_blocks) for manager in managers)


def num_held_blocks(req_to_blocks: Mapping[str, Iterable[Any]]) -> int:
    """The distinct blocks of one group's tables: a block requests share through the prefix
    cache counts once, a null entry (a window group's freed one) not at all."""
    held = {
        block.block_id for blocks in req_to_blocks.values() for block in blocks if not block.is_null
    }
    return len(held)
