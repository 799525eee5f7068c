"""The `_block_ids` rows of a hybrid model's KV cache groups after the first.

Group 0's rows come from the output's flat block ids (`step_rows.py`); each later group's
new blocks ride in `SchedulerOutput.new_block_ids_by_group`, null entries (block 0) included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stepscope.engine.scheduler_output import GroupBlockIds

from .columns import TableBuffer


class GroupTableLengths:
    """The length of each request's block table in each group after the first."""

    def __init__(self) -> None:
        self._lengths: dict[int, list[int]] = {}

    def forget(self, request_index: int) -> None:
        """Drop a finished request's tables."""
        self._lengths.pop(request_index, None)

    def add_rows(
        self,
        buffer: TableBuffer,
        step: int,
        request_ids: Sequence[str],
        indices: Sequence[int],
        by_group: Mapping[str, GroupBlockIds],
        num_running: int,
    ) -> None:
        """A row per block id of groups 1 and later; an admission's tables start at slot 0."""
        columns = buffer.columns
        for position, (req_id, index) in enumerate(zip(request_ids, indices, strict=True)):
            groups = by_group[req_id][1:]
            continued = self._lengths.get(index) if position < num_running else None
            firsts = continued or [0] * len(groups)
            self._lengths[index] = [f + len(ids) for f, ids in zip(firsts, groups, strict=True)]
            for group, (first, block_ids) in enumerate(zip(firsts, groups, strict=True), start=1):
                count = len(block_ids)
                columns["step"].extend_repeated(step, count)
                columns["request_index"].extend_repeated(index, count)
                columns["slot"].extend(range(first, first + count))
                columns["block_id"].extend(block_ids)
                columns["kv_cache_group"].extend_repeated(group, count)
