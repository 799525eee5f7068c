"""Which data-parallel rank an engine core records as, and where its trace goes.

The rank is read from real vLLM configs (0.32 and 0.33) set up as
`EngineCoreProc.run_engine_core` leaves them: a dense model's ranks are made
independent (`data_parallel_rank` 0, `data_parallel_size` 1), a MoE model's keep both.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from stepscope.tracer.vllm.attach.dp_rank import DataParallelRank
from stepscope.tracer.vllm.attach.settings import trace_path

RANK_1_OF_2 = DataParallelRank(rank=1, size=2)

ENGINE_CORE_CONFIGS = """
import json
from vllm.config import ParallelConfig
from stepscope.tracer.vllm.attach.dp_rank import data_parallel_rank


def engine_core(dp_rank, dense):
    parallel = ParallelConfig(data_parallel_size=2, data_parallel_rank=dp_rank)
    parallel.data_parallel_index = dp_rank
    if dense:
        parallel.reconfigure_for_independent_dp_rank()
    return data_parallel_rank(type("VllmConfig", (), {"parallel_config": parallel}))


found = {
    f"{kind}-{rank}": (found.rank, found.size)
    for kind, dense in (("dense", True), ("moe", False))
    for rank in (0, 1)
    for found in [engine_core(rank, dense)]
}
alone = data_parallel_rank(type("VllmConfig", (), {"parallel_config": ParallelConfig()}))
print(json.dumps({"ranks": found, "alone": alone}))
"""


def _ranks_in(venv: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(venv.run(["-c", ENGINE_CORE_CONFIGS]).stdout)
    return result


@pytest.mark.slow
def test_each_engine_core_of_a_vllm_0_33_server_knows_its_rank(vllm: Any) -> None:
    found = _ranks_in(vllm)
    expected = {f"{kind}-{rank}": [rank, 2] for kind in ("dense", "moe") for rank in (0, 1)}
    assert found == {"ranks": expected, "alone": None}


@pytest.mark.slow
def test_each_engine_core_of_a_vllm_0_32_server_knows_its_rank(vllm_live: Any) -> None:
    found = _ranks_in(vllm_live)
    expected = {f"{kind}-{rank}": [rank, 2] for kind in ("dense", "moe") for rank in (0, 1)}
    assert found == {"ranks": expected, "alone": None}


def test_the_meta_keys_name_rank_and_size() -> None:
    assert RANK_1_OF_2.meta() == {"dp_rank": "1", "dp_size": "2"}


def _config(instance_id: str = "1796056479631988164") -> SimpleNamespace:
    return SimpleNamespace(additional_config={}, instance_id=instance_id)


def test_rank_in_a_file_template(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE", "/traces/run-{rank}-{pid}.duckdb")
    assert trace_path(_config(), RANK_1_OF_2) == Path(f"/traces/run-1-{os.getpid()}.duckdb")
    assert trace_path(_config()) == Path(f"/traces/run-0-{os.getpid()}.duckdb")


def test_a_rank_never_shares_a_file_named_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE", "/traces/server.duckdb")
    assert trace_path(_config(), RANK_1_OF_2) == Path("/traces/server-rank1.duckdb")
    assert trace_path(_config(), DataParallelRank(0, 2)) == Path("/traces/server-rank0.duckdb")
    assert trace_path(_config()) == Path("/traces/server.duckdb"), "no rank, no suffix"


def test_a_directory_gets_a_folder_per_server_and_a_file_per_rank(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE", str(tmp_path / "traces") + os.sep)
    paths = [trace_path(_config(), DataParallelRank(rank, 2)) for rank in (0, 1)]
    server = tmp_path / "traces" / "vllm-1796056479631988164"
    assert paths == [server / "rank0.duckdb", server / "rank1.duckdb"]
    assert server.is_dir(), "the folder is made, so each engine core can create its trace"
    alone = trace_path(_config())
    assert alone is not None and alone.parent == tmp_path / "traces"
    assert alone.name.endswith(f"-{os.getpid()}.duckdb"), "an engine without ranks: as before"
