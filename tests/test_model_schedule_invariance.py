"""Scheduling does not change what the model says: budgets, chunking, prefix caching, policy.

Each config below splits, batches, preempts and caches the same requests
differently; every request must still get the same tokens, greedy or sampled.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from model_checks import tiny_model, toml_workload  # noqa: E402
from stepscope.engine import EngineLoop, Workload  # noqa: E402
from stepscope.engine.torch_runner import TorchModelRunner  # noqa: E402

WORKLOAD = """
seed = 4
num_requests = 12
[config]
block_size = 4
num_blocks = 36
max_num_batched_tokens = 24
max_num_seqs = 5
max_model_len = 80
[arrivals]
process = "poisson"
rate = 1.0
[prompt_len]
distribution = "uniform"
min = 3
max = 40
[output_len]
distribution = "uniform"
min = 4
max = 16
[[prefix_groups]]
share = 0.5
prefix_len = 10
[priorities]
values = [0, 1]
{sampling}
"""

SAMPLED = """
[sampling]
temperature = 0.9
top_k = 200
top_p = 0.9
seed = 77
"""

CONFIGS: dict[str, dict[str, Any]] = {
    "tight pool, small budget": {},
    "no chunking, no prefix caching, roomy": {
        "max_num_batched_tokens": 80,
        "enable_chunked_prefill": False,
        "enable_prefix_caching": False,
        "num_blocks": 400,
    },
    "tiny chunks, one request at a time": {
        "max_num_batched_tokens": 8,
        "long_prefill_token_threshold": 3,
        "max_num_seqs": 1,
    },
    "priority, tighter pool": {"policy": "priority", "num_blocks": 24},
    "async scheduling, tight pool": {"async_scheduling": True},
}


def _outputs(workload: Workload, knobs: dict[str, Any]) -> tuple[dict[str, Any], int]:
    workload = workload.with_config(workload.config.with_knobs(knobs))
    loop = EngineLoop(workload, TorchModelRunner(tiny_model(), workload.config))
    num_preemptions = sum(
        len(r.engine_step.scheduler_output.preempted_req_ids) for r in loop.run() if r.engine_step
    )
    return {req_id: f.output_token_ids for req_id, f in loop.final().items()}, num_preemptions


@pytest.mark.parametrize("sampling", ["", SAMPLED], ids=["greedy", "seeded-sampling"])
def test_every_schedule_yields_the_same_tokens(sampling: str) -> None:
    workload = toml_workload(WORKLOAD.format(sampling=sampling))
    runs = {name: _outputs(workload, knobs) for name, knobs in CONFIGS.items()}
    baseline, _ = runs["tight pool, small budget"]
    assert all(len(tokens) >= 4 for tokens in baseline.values())
    assert sum(num_preemptions for _, num_preemptions in runs.values()) > 0
    for name, (outputs, _) in runs.items():
        assert outputs == baseline, name
