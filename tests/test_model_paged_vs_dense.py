"""The paged forward equals a dense forward of each request's sequence, step by step.

Real engine runs with a small KV pool, so chunked prefill, preemption and
recompute, prefix-cache hits that share blocks, and batches that mix prefill
chunks with decodes all happen; every sampled position's logits are compared.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from model_checks import (  # noqa: E402
    FLOAT32_ATOL,
    Corruption,
    LoggedRun,
    check_against_dense,
    pressure_workload,
    run_logged,
    tiny_model,
)
from stepscope.engine.model.input_batch import BlockTableError  # noqa: E402
from stepscope.engine.torch_runner import TorchModelRunner  # noqa: E402


def assert_exercised(run: LoggedRun) -> None:
    coverage = run.coverage
    assert coverage.num_preemptions > 0 and coverage.num_resumed > 0
    assert coverage.num_prefix_hit_tokens > 0 and coverage.num_steps_sharing_blocks > 0
    assert coverage.max_chunks_per_prompt >= 3
    assert coverage.num_mixed_steps > 0


@pytest.mark.parametrize(("seed", "policy"), [(1, "fcfs"), (2, "priority")])
def test_paged_logits_equal_dense_through_chunks_preemption_and_prefix_hits(
    seed: int, policy: str
) -> None:
    model = tiny_model()
    run = run_logged(pressure_workload(seed, policy), model)
    assert_exercised(run)
    assert all(finish.finish_reason is not None for finish in run.final.values())
    assert check_against_dense(model, run, FLOAT32_ATOL) > 100


def _repeat_second_block(at_step: int) -> Corruption:
    """Make a decoding request's first table entry name its second block.

    Swapping two blocks would not do: keys carry their rotary position, so the
    order in which a decode reads its past does not matter; which keys it reads does.
    """

    def corrupt(runner: TorchModelRunner, step: int) -> None:
        if step != at_step:
            return
        for state in runner.request_states.states.values():
            if len(state.block_ids) >= 2 and state.num_output_tokens > 0:
                state.block_ids[0] = state.block_ids[1]
                return
        raise AssertionError(f"no request to corrupt at step {step}")

    return corrupt


def test_a_corrupted_block_table_fails_the_check() -> None:
    model = tiny_model()
    workload = pressure_workload(1, "fcfs")
    check_against_dense(model, run_logged(workload, model), FLOAT32_ATOL)
    corrupted = run_logged(workload, model, corrupt=_repeat_second_block(at_step=12))
    with pytest.raises(AssertionError, match=r"\|paged - dense\|"):
        check_against_dense(model, corrupted, FLOAT32_ATOL)


def test_a_table_naming_the_null_block_is_refused_before_any_write() -> None:
    model = tiny_model()
    workload = pressure_workload(1, "fcfs")

    def point_at_null_block(runner: TorchModelRunner, step: int) -> None:
        if step == 5:
            next(iter(runner.request_states.states.values())).block_ids[0] = 0

    with pytest.raises(BlockTableError, match="null block 0"):
        run_logged(workload, model, corrupt=point_at_null_block)


def test_a_table_too_short_for_the_chunk_is_refused() -> None:
    model = tiny_model()
    workload = pressure_workload(1, "fcfs")

    def truncate(runner: TorchModelRunner, step: int) -> None:
        if step == 3:
            for state in runner.request_states.states.values():
                del state.block_ids[1:]

    with pytest.raises(BlockTableError, match="cannot hold"):
        run_logged(workload, model, corrupt=truncate)
