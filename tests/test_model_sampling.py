"""Sampling: greedy is the argmax; seeded sampling is reproducible whatever the batch."""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")

from model_checks import tiny_model, toml_workload  # noqa: E402
from stepscope.engine import EngineLoop, SamplingParams  # noqa: E402
from stepscope.engine.model.sampler import Sampler, apply_top_k_top_p  # noqa: E402
from stepscope.engine.request_states import CachedRequestState  # noqa: E402
from stepscope.engine.torch_runner import TorchModelRunner  # noqa: E402

VOCAB = 50


def _state(req_id: str, num_outputs: int = 0, **params: object) -> CachedRequestState:
    return CachedRequestState(
        req_id=req_id,
        token_ids=[1] * (3 + num_outputs),
        num_prompt_tokens=3,
        block_ids=[1],
        sampling_params=SamplingParams(max_tokens=100, **params),  # type: ignore[arg-type]
    )


def _logits(seed: int, rows: int = 1) -> torch.Tensor:
    return torch.randn(rows, VOCAB, generator=torch.Generator().manual_seed(seed))


def test_greedy_is_the_argmax_of_each_row() -> None:
    logits = _logits(0, rows=4)
    states = [_state(f"r{i}") for i in range(4)]
    assert Sampler().sample(logits, states) == logits.argmax(dim=-1).tolist()


def test_a_seeded_token_does_not_depend_on_the_rest_of_the_batch() -> None:
    row = _logits(1)
    mine = _state("mine", num_outputs=5, temperature=1.0, seed=42)
    alone = Sampler().sample(row, [mine])
    others = [_state(f"o{i}", temperature=0.7, top_k=5, seed=i) for i in range(6)]
    batch = torch.cat([_logits(2, rows=3), row, _logits(3, rows=3)])
    states = [*others[:3], mine, *others[3:]]
    assert Sampler().sample(batch, states)[3] == alone[0]
    assert Sampler(runner_seed=9).sample(row, [mine]) == alone  # an explicit seed wins


def test_seeded_draws_follow_the_distribution_and_vary_with_the_output_index() -> None:
    logits = torch.full((1, VOCAB), -30.0)
    logits[0, 7], logits[0, 11] = 0.0, float(torch.log(torch.tensor(3.0)))  # p = 1/4, 3/4
    draws = Counter(
        Sampler().sample(logits, [_state("r", num_outputs=k, temperature=1.0, seed=5)])[0]
        for k in range(400)
    )
    assert set(draws) == {7, 11}
    assert 0.65 < draws[11] / 400 < 0.85


def test_requests_without_a_seed_get_one_from_their_id() -> None:
    logits = _logits(4)
    draws = {
        req_id: [
            Sampler().sample(logits, [_state(req_id, num_outputs=k, temperature=2.0)])[0]
            for k in range(20)
        ]
        for req_id in ("a", "b")
    }
    again = [
        Sampler().sample(logits, [_state("a", num_outputs=k, temperature=2.0)])[0]
        for k in range(20)
    ]
    assert draws["a"] == again
    assert draws["a"] != draws["b"]


def test_top_k_one_and_a_tiny_top_p_are_greedy() -> None:
    logits = _logits(5, rows=2)
    states = [
        _state("k", temperature=5.0, top_k=1, seed=1),
        _state("p", temperature=5.0, top_p=1e-6, seed=1),
    ]
    assert Sampler().sample(logits, states) == logits.argmax(dim=-1).tolist()


def test_top_k_and_top_p_keep_the_right_tokens() -> None:
    logits = torch.log(torch.tensor([[0.1, 0.4, 0.2, 0.3], [0.1, 0.4, 0.2, 0.3]]))
    filtered = apply_top_k_top_p(logits, torch.tensor([2, 0]), torch.tensor([1.0, 0.65]))
    kept = torch.isfinite(filtered)
    assert kept[0].tolist() == [False, True, False, True]  # the 2 most likely
    assert kept[1].tolist() == [False, True, False, True]  # 0.4 + 0.3 reaches 0.65


def test_min_tokens_holds_back_eos_and_stop_ids() -> None:
    logits = torch.zeros(1, VOCAB)
    logits[0, 2], logits[0, 9], logits[0, 4] = 10.0, 9.0, 1.0
    params = {"eos_token_id": 2, "stop_token_ids": (9,), "min_tokens": 3}
    assert Sampler().sample(logits, [_state("r", num_outputs=2, **params)]) == [4]
    assert Sampler().sample(logits, [_state("r", num_outputs=3, **params)]) == [2]


def test_sampled_runs_differ_from_greedy_runs() -> None:
    text = """
    seed = 1
    num_requests = 4
    [config]
    block_size = 8
    num_blocks = 40
    max_num_batched_tokens = 64
    max_num_seqs = 4
    max_model_len = 64
    [arrivals]
    process = "constant"
    interval = 0
    [prompt_len]
    distribution = "fixed"
    value = 8
    [output_len]
    distribution = "fixed"
    value = 12
    """
    outputs = {}
    for sampling in ("", "[sampling]\ntemperature = 1.0\nseed = 3\n"):
        workload = toml_workload(text.replace("    ", "") + sampling)
        loop = EngineLoop(workload, TorchModelRunner(tiny_model(), workload.config))
        list(loop.run())
        outputs[sampling] = [f.output_token_ids for f in loop.final().values()]
    greedy, sampled = outputs.values()
    assert greedy != sampled
    assert all(len(tokens) == 12 for tokens in greedy + sampled)
