"""Bad workloads get one clear error naming the file, the line, the request and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stepscope.engine import WorkloadError, load_workload


def _good() -> dict[str, Any]:
    return {
        "config": {
            "block_size": 4,
            "num_blocks": 8,
            "max_num_batched_tokens": 16,
            "max_num_seqs": 4,
            "max_model_len": 32,
        },
        "requests": [
            {
                "id": "a",
                "arrival_step": 0,
                "prompt_token_ids": [1, 2, 3],
                "output_token_ids": [5, 2],
                "max_tokens": 4,
                "eos_token_id": 2,
            },
            {
                "id": "b",
                "arrival_step": 1,
                "prompt_token_ids": [4, 5],
                "output_token_ids": [6],
                "max_tokens": 1,
            },
        ],
        "max_steps": 50,
    }


def _error_for(tmp_workload: Any, workload: dict[str, Any] | str) -> str:
    path = tmp_workload(workload)
    with pytest.raises(WorkloadError) as caught:
        load_workload(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    return message


def test_a_good_workload_loads_with_defaults(tmp_workload: Any) -> None:
    workload = load_workload(tmp_workload(_good()))
    first, second = workload.requests
    assert first.sampling_params.eos_token_id == 2
    assert second.sampling_params.eos_token_id is None  # ignores EOS
    assert second.arrival_time == pytest.approx(1 + 1e-6)
    assert workload.config.policy.value == "fcfs"
    assert workload.config.enable_prefix_caching and workload.config.enable_chunked_prefill


def test_equal_token_ids_are_one_int_across_the_workload(tmp_workload: Any) -> None:
    """Prompts and tapes share one int per id (ids past the small-int cache, which CPython
    shares anyway): a long workload's tokens take a reference each, not an int each."""
    good = _good()
    good["requests"][0].update(prompt_token_ids=[4000, 4001, 4000], output_token_ids=[4001, 2])
    good["requests"][1].update(prompt_token_ids=[4001, 4000], output_token_ids=[4000])
    workload = load_workload(tmp_workload(good))
    tokens = [
        t for spec in workload.requests for t in spec.prompt_token_ids + spec.output_token_ids
    ]
    assert tokens == [4000, 4001, 4000, 4001, 2, 4001, 4000, 4000]
    assert len({id(token) for token in tokens}) == len(set(tokens)) == 3


def test_the_line_request_and_field_are_named(tmp_path: Path) -> None:
    workload = _good()
    workload["requests"][1]["max_tokens"] = 0
    text = json.dumps({"config": workload["config"], "max_steps": 50}, indent=1)[:-2]
    text += ',\n "requests": [\n  ' + ",\n  ".join(json.dumps(r) for r in workload["requests"])
    text += "\n ]\n}\n"
    path = tmp_path / "w.json"
    path.write_text(text)
    with pytest.raises(WorkloadError) as caught:
        load_workload(path)
    assert str(caught.value) == (
        f"{path}:12: requests[1] (id 'b'): max_tokens: must be at least 1, got 0"
    )


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda w: w["requests"][0].pop("prompt_token_ids"),
            "requests[0] (id 'a'): prompt_token_ids: required",
        ),
        (
            lambda w: w["requests"][0].update(prompt_token_ids=[1, "x"]),
            "prompt_token_ids: item 1 is not a token id: 'x'",
        ),
        (
            lambda w: w["requests"][0].update(prompt_token_ids=[-1]),
            "prompt_token_ids: item 0 is not a token id: -1",
        ),
        (
            lambda w: w["requests"][1].update(id="a"),
            "requests[1] (id 'a'): id: duplicate request id",
        ),
        (lambda w: w["requests"][1].update(id=5), "requests[1]: id: expected a string, got 5"),
        (
            lambda w: w["requests"][1].update(id=True),
            "requests[1]: id: expected a string, got True",
        ),
        (lambda w: w["requests"][1].pop("id"), "requests[1]: id: required, a string"),
        (lambda w: w["requests"][1].update(id=""), "requests[1] (id ''): id: empty"),
        (lambda w: w["requests"][0].update(min_tokens=9), "min_tokens: must be at most max_tokens"),
        (lambda w: w["requests"][1].update(abort_step=0), "abort_step: must be at least 1, got 0"),
        (
            lambda w: w["requests"][0].update(priorty=1),
            "requests[0] (id 'a'): priorty: unknown field",
        ),
        (lambda w: w["requests"][0].update(arrival_time="soon"), "arrival_time: expected a number"),
        (lambda w: w["config"].pop("num_blocks"), "config.num_blocks: required"),
        (
            lambda w: w["config"].update(policy="lifo"),
            "config.policy: must be 'fcfs' or 'priority'",
        ),
        (lambda w: w["config"].update(block_size=0), "config.block_size: must be at least 1"),
        (lambda w: w["config"].update(watermark=1.5), "config.watermark: must be in [0, 1)"),
        (lambda w: w["config"].update(blocksize=4), "config.blocksize: unknown knob"),
        (
            lambda w: w["config"].update(enable_chunked_prefill=False),
            "config.max_num_batched_tokens: 16 is smaller than max_model_len 32",
        ),
        (
            lambda w: w["config"].update(max_num_seqs=32),
            "config.max_num_batched_tokens: 16 must be at least max_num_seqs 32",
        ),
        (
            lambda w: w["config"].update(enable_prefix_caching="yes"),
            "config.enable_prefix_caching: expected true or false",
        ),
        (lambda w: w.update(requests={}), "requests: required, a JSON list"),
        (lambda w: w.update(max_steps=0), "max_steps: must be at least 1"),
        (lambda w: w.update(extra=1), "extra: unknown field"),
    ],
)
def test_invalid_fields_are_reported(tmp_workload: Any, mutate: Any, expected: str) -> None:
    workload = _good()
    mutate(workload)
    assert expected in _error_for(tmp_workload, workload)


def test_invalid_json_names_line_and_column(tmp_workload: Any) -> None:
    message = _error_for(tmp_workload, '{\n  "config": {,\n}')
    assert ":2:" in message and "invalid JSON" in message


def test_a_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="cannot read"):
        load_workload(tmp_path / "missing.json")


def test_the_top_level_must_be_an_object(tmp_workload: Any) -> None:
    assert "top level: a workload is a JSON object" in _error_for(tmp_workload, "[1, 2]")
