"""Synthetic workloads from TOML: what they generate, that it is seeded, and clear errors."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO
from stepscope.engine import EngineLoop, TapeModelRunner, WorkloadError, load_workload
from stepscope.engine.synthetic.toml_workload import parse_toml_workload

EXAMPLES = sorted((REPO / "examples" / "workloads").glob("*.toml"))

BASE = """\
description = "test"
seed = 5
num_requests = 200
vocab_size = 1000

[config]
block_size = 8
num_blocks = 200
max_num_batched_tokens = 128
max_num_seqs = 16
max_model_len = 256

[arrivals]
process = "poisson"
rate = 2.0

[prompt_len]
distribution = "lognormal"
mean = 40
sigma = 0.5
min = 5
max = 120

[output_len]
distribution = "uniform"
min = 3
max = 9

[[prefix_groups]]
share = 0.25
prefix_len = 16

[[prefix_groups]]
share = 0.5
prefix_len = 30

[priorities]
values = [0, 5]
weights = [1, 3]

[sampling]
eos_token_id = 3
stop_token_ids = [4]
temperature = 0.5
seed = 100
"""


def test_the_examples_run_to_completion_on_the_tape() -> None:
    assert len(EXAMPLES) >= 3
    for path in EXAMPLES:
        workload = load_workload(path)
        loop = EngineLoop(
            workload, TapeModelRunner({s.request_id: s.output_token_ids for s in workload.requests})
        )
        list(loop.run())
        reasons = {str(f.finish_reason) for f in loop.final().values()}
        assert reasons == {"length"}, path.name


def test_the_same_description_generates_the_same_workload() -> None:
    assert parse_toml_workload(BASE) == parse_toml_workload(BASE)
    reseeded = parse_toml_workload(BASE.replace("seed = 5", "seed = 6"))
    assert reseeded.requests != parse_toml_workload(BASE).requests


def test_requests_follow_the_description() -> None:
    workload = parse_toml_workload(BASE, source="w.toml")
    requests = workload.requests
    assert workload.config.block_size == 8 and workload.description == "test"
    assert [r.request_id for r in requests] == [f"r{i}" for i in range(200)]
    steps = [r.arrival_step for r in requests]
    assert steps == sorted(steps) and steps[0] == 0
    assert 1.6 < len(requests) / (steps[-1] + 1) < 2.5  # about 2 per step
    for request in requests:
        prompt = request.prompt_token_ids
        assert all(3 <= t < 1000 for t in prompt)  # first_token_id 3, vocab_size 1000
        params = request.sampling_params
        assert 3 <= params.max_tokens <= 9 and len(request.output_token_ids) == params.max_tokens
        assert not {3, 4} & set(request.output_token_ids)  # the tape never stops early
        assert (params.eos_token_id, params.stop_token_ids, params.temperature) == (3, (4,), 0.5)
        assert params.seed == 100 + int(request.request_id[1:])
        assert request.priority in (0, 5)
    first_16 = Counter(r.prompt_token_ids[:16] for r in requests)
    first_30 = Counter(r.prompt_token_ids[:30] for r in requests)
    shared_16 = sorted(n for n in first_16.values() if n > 1)
    shared_30 = [n for n in first_30.values() if n > 1]
    assert len(shared_16) == 2 and 30 < shared_16[0] < 70 and shared_30 == [shared_16[1]]
    assert 80 < shared_16[1] < 120  # shares 0.25 and 0.5 of 200
    own_lens = [len(r.prompt_token_ids) for r in requests if first_16[r.prompt_token_ids[:16]] == 1]
    assert min(own_lens) >= 5 and max(own_lens) <= 120
    assert 33 < statistics.mean(own_lens) < 47
    assert 120 < sum(r.priority == 5 for r in requests) < 180


def test_changing_one_distribution_leaves_the_other_draws_alone() -> None:
    longer = parse_toml_workload(BASE.replace("min = 3\nmax = 9", "min = 20\nmax = 30"))
    base = parse_toml_workload(BASE)
    assert [r.prompt_token_ids for r in longer.requests] == [
        r.prompt_token_ids for r in base.requests
    ]
    assert [r.arrival_step for r in longer.requests] == [r.arrival_step for r in base.requests]


def test_bursts_and_constant_arrivals() -> None:
    burst = parse_toml_workload(
        BASE.replace('process = "poisson"\nrate = 2.0', 'process = "burst"\nsize = 8\nevery = 5')
    )
    assert [r.arrival_step for r in burst.requests[:17]] == [0] * 8 + [5] * 8 + [10]
    constant = parse_toml_workload(
        BASE.replace('process = "poisson"\nrate = 2.0', 'process = "constant"\ninterval = 1.5')
    )
    assert [r.arrival_step for r in constant.requests[:5]] == [0, 1, 3, 4, 6]


def test_prompts_are_clamped_below_max_model_len() -> None:
    text = BASE.replace("max = 120", "max = 1000").replace("mean = 40", "mean = 900")
    workload = parse_toml_workload(text)
    assert max(len(r.prompt_token_ids) for r in workload.requests) == 255


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "w.toml"
    path.write_text(text)
    with pytest.raises(WorkloadError) as caught:
        load_workload(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path))
    return message[len(str(path)) :]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("rate = 2.0", "rate = -1", ":15: arrivals.rate: must be greater than 0, got -1"),
        ("rate = 2.0", "rat = 2.0", ":15: arrivals.rat: unknown key (known: process, rate)"),
        ('process = "poisson"', 'process = "zipf"', ":14: arrivals.process: expected one of"),
        ("block_size = 8", "block_size = 0", ":7: config.block_size: must be at least 1, got 0"),
        (
            "max_model_len = 256",
            "max_model_len = 256\nwatermark = 2",
            ":12: config.watermark: must be in",
        ),
        (
            'distribution = "lognormal"',
            'distribution = "zipf"',
            ":18: prompt_len.distribution: expected one of fixed",
        ),
        ("min = 3\nmax = 9", "min = 3\nmax = 2", ":27: output_len.max: must be at least 3, got 2"),
        (
            "share = 0.5",
            "share = 0.9",
            ":34: prefix_groups[1].share: shares add up to 1.15, more than 1",
        ),
        (
            "prefix_len = 30",
            "prefix_len = 255",
            ":35: prefix_groups[1].prefix_len: must be at most max_model_len - 2 = 254",
        ),
        (
            "weights = [1, 3]",
            "weights = [1]",
            ":39: priorities.weights: needs one weight per value (2)",
        ),
        (
            "values = [0, 5]",
            'values = [0, "high"]',
            ":38: priorities.values[1]: expected an integer",
        ),
        ("temperature = 0.5", "top_p = 1.5", ":44: sampling.top_p: must be in (0, 1], got 1.5"),
        (
            "eos_token_id = 3",
            "eos_token_id = 1000",
            ":42: sampling.eos_token_id: must be below vocab_size",
        ),
        ("num_requests = 200", "num_requests = 0", ":3: num_requests: must be at least 1, got 0"),
        ('description = "test"', "colour = 1", ":1: colour: unknown key"),
        ("[config]", "[configs]", ":6: configs: unknown key"),
        ("seed = 5", "seed = ", ":2:8: invalid TOML: Invalid value"),
    ],
)
def test_errors_name_the_file_line_and_key(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    assert old in BASE
    message = _error(tmp_path, BASE.replace(old, new, 1))
    assert message.startswith(expected), message


def test_a_missing_table_is_named(tmp_path: Path) -> None:
    text = BASE.replace('[output_len]\ndistribution = "uniform"\nmin = 3\nmax = 9\n', "")
    assert _error(tmp_path, text) == ": output_len: required, a table"
