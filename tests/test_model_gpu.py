"""The paged-equals-dense and scheduling checks on a CUDA device (skipped without one)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from model_checks import (  # noqa: E402
    check_against_dense,
    pressure_workload,
    run_logged,
    tiny_model,
    toml_workload,
)
from stepscope.engine import EngineLoop  # noqa: E402
from stepscope.engine.model_runner_choice import create_model_runner  # noqa: E402
from test_model_paged_vs_dense import assert_exercised  # noqa: E402
from test_model_schedule_invariance import CONFIGS, SAMPLED, WORKLOAD  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

TOLERANCE = {"float32": 1e-3, "bfloat16": 0.5}
"""Largest |paged - dense| logit; bfloat16 keeps 8 bits, and logits reach about 12."""


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_paged_logits_equal_dense_on_cuda(dtype: str) -> None:
    model = tiny_model("cuda", dtype)
    run = run_logged(pressure_workload(1, "fcfs"), model)
    assert_exercised(run)
    assert check_against_dense(model, run, TOLERANCE[dtype]) > 100


def test_cuda_logits_equal_the_cpu_dense_reference() -> None:
    run = run_logged(pressure_workload(2, "priority"), tiny_model("cuda"))
    assert check_against_dense(tiny_model("cpu"), run, TOLERANCE["float32"]) > 100


@pytest.mark.parametrize("sampling", ["", SAMPLED], ids=["greedy", "seeded-sampling"])
def test_every_schedule_yields_the_same_tokens_on_cuda(sampling: str) -> None:
    workload = toml_workload(WORKLOAD.format(sampling=sampling))
    outputs = []
    for knobs in CONFIGS.values():
        configured = workload.with_config(workload.config.with_knobs(knobs))
        loop = EngineLoop(configured, create_model_runner("tiny", configured, device="cuda"))
        list(loop.run())
        outputs.append({req_id: f.output_token_ids for req_id, f in loop.final().items()})
    assert all(output == outputs[0] for output in outputs)
