"""Which data-parallel rank of a vLLM server an engine core is, read from its own config.

A server with `--data-parallel-size N` runs N engine cores, each with its own
scheduler. vLLM's `EngineCoreProc.run_engine_core` sets `data_parallel_index` to the
core's rank in every case; a dense model's ranks are independent, so it then calls
`reconfigure_for_independent_dp_rank`, which resets `data_parallel_rank` to 0 and
`data_parallel_size` to 1. The server's size survives there only in
`elastic_ep_max_dp_size`, which `ParallelConfig` sets to `data_parallel_size` unless
elastic EP (MoE only, where `data_parallel_size` is kept) is on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DataParallelRank:
    """One engine core's place in a data-parallel server."""

    rank: int
    size: int

    def meta(self) -> dict[str, str]:
        """The trace's `_meta` keys that name the rank."""
        return {"dp_rank": str(self.rank), "dp_size": str(self.size)}


def data_parallel_rank(vllm_config: Any) -> DataParallelRank | None:
    """This engine core's rank, or None when the server is not data parallel."""
    parallel = vllm_config.parallel_config
    size = _server_size(parallel)
    if size <= 1:
        return None
    rank = getattr(parallel, "data_parallel_index", None)
    if rank is None:
        rank = parallel.data_parallel_rank
    return DataParallelRank(int(rank), size)


def _server_size(parallel: Any) -> int:
    """The server's `--data-parallel-size`, also where an independent rank was set to 1."""
    size = int(parallel.data_parallel_size)
    if size > 1 or getattr(parallel, "enable_elastic_ep", False):
        return size
    return int(getattr(parallel, "elastic_ep_max_dp_size", None) or size)
