"""The per-request sampling fields of the JSON workload format: defaults and errors."""

from __future__ import annotations

from typing import Any

import pytest
from stepscope.engine import SamplingParams, WorkloadError, load_workload


def _workload(**fields: Any) -> dict[str, Any]:
    request = {"id": "a", "prompt_token_ids": [1, 2, 3], "max_tokens": 4, **fields}
    config = {"block_size": 4, "num_blocks": 8, "max_num_batched_tokens": 16, "max_num_seqs": 2}
    return {"config": config, "requests": [request]}


def test_sampling_fields_default_to_greedy(tmp_workload: Any) -> None:
    params = load_workload(tmp_workload(_workload())).requests[0].sampling_params
    assert (params.temperature, params.top_k, params.top_p, params.seed) == (0.0, 0, 1.0, None)
    assert params.is_greedy


def test_sampling_fields_are_read(tmp_workload: Any) -> None:
    workload = _workload(temperature=0.7, top_k=40, top_p=0.9, seed=12)
    params = load_workload(tmp_workload(workload)).requests[0].sampling_params
    assert params == SamplingParams(max_tokens=4, temperature=0.7, top_k=40, top_p=0.9, seed=12)
    assert not params.is_greedy


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"temperature": -0.5}, "temperature: must be at least 0, got -0.5"),
        ({"temperature": "hot"}, "temperature: expected a finite number, got 'hot'"),
        ({"top_k": -1}, "top_k: must be at least 0, got -1"),
        ({"top_k": 2.5}, "top_k: expected an integer, got 2.5"),
        ({"top_p": 0}, "top_p: must be in (0, 1], got 0.0"),
        ({"top_p": 1.01}, "top_p: must be in (0, 1], got 1.01"),
        ({"seed": -3}, "seed: must be at least 0, got -3"),
        ({"seed": True}, "seed: expected an integer, got True"),
    ],
)
def test_bad_sampling_fields_name_file_line_request_and_field(
    tmp_workload: Any, fields: dict[str, Any], expected: str
) -> None:
    path = tmp_workload(_workload(**fields))
    with pytest.raises(WorkloadError) as caught:
        load_workload(path)
    assert str(caught.value) == f"{path}:9: requests[0] (id 'a'): {expected}"


def test_sampling_params_check_their_ranges() -> None:
    for bad in ({"temperature": -1.0}, {"top_k": -1}, {"top_p": 0.0}, {"top_p": 2.0}):
        with pytest.raises(ValueError):
            SamplingParams(max_tokens=4, **bad)  # type: ignore[arg-type]
    assert SamplingParams(max_tokens=4, eos_token_id=2, stop_token_ids=(7,)).all_stop_token_ids == (
        2,
        7,
    )
    assert SamplingParams(max_tokens=4, stop_token_ids=(7,)).all_stop_token_ids == (7,)
