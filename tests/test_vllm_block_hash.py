"""Block hashes equal to vLLM's: the `block_hasher` a vLLM recording carries, and its uses.

Inside both vLLM venvs (0.33.0 and 0.32.0), the engine's vLLM hasher must give random
requests exactly the hashes vLLM's own `request_block_hasher` gives them, and the block
pool stepscope's engine ends a workload with must hold the hashes vLLM's holds, block for
block. A trace recorded from vLLM carries the hasher and its NONE_HASH and still replays
identically. With the plain venv: an older trace or a workload without the field reads as
stepscope's own hasher, a bad value is a one-line error, a checkpoint hashed as vLLM does
restores, and neither a what-if nor a redacted trace can change hashers unseen.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TESTS
from stepscope.engine import InputError, Workload, WorkloadError, load_workload
from stepscope.engine.block_hash import sha256
from stepscope.engine.restore import CheckpointError
from stepscope.replay.checkpoints import checkpoint_steps, read_checkpoint
from stepscope.replay.diff import Classification, diff_traces
from stepscope.replay.exact import replay_exact
from stepscope.replay.from_step import StepWindow
from stepscope.replay.inputs import recorded_config
from stepscope.replay.whatif import replay_whatif
from stepscope.schema import open_trace
from stepscope.tracer.redact import Redactor
from traces import case, record
from vllm_env import VllmPython

SCRIPT = TESTS / "vllm_block_hashes.py"
VERSIONS = {"0.33.0": "vllm", "0.32.0": "vllm_live"}
"""Each supported vLLM version, and the fixture of the venv that has it."""
PREFIX_CACHING = ("04", "06", "10")
"""Conformance cases whose prefix-cache hits and evictions hash many blocks."""
LORA_CASE = TESTS / "conformance_lora" / "gate_max1.json"
HASH_SEED = "7"
VLLM_NONE_HASH = sha256(HASH_SEED).hex()
"""vLLM's NONE_HASH under PYTHONHASHSEED=7: SHA-256 of the pickled seed."""
VLLM_HASHER = {"block_hasher": "vllm-sha256", "none_hash": VLLM_NONE_HASH}


def _venv(request: pytest.FixtureRequest, version: str) -> VllmPython:
    venv: VllmPython = request.getfixturevalue(VERSIONS[version])
    return venv


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _with_prefix_caching(source: Path, out: Path) -> Path:
    raw = json.loads(source.read_text())
    raw["config"]["enable_prefix_caching"] = True
    path = out / f"caching-{source.name}"
    path.write_text(json.dumps(raw))
    return path


def _with_knobs(source: Path, knobs: dict[str, Any]) -> Workload:
    workload = load_workload(source)
    return workload.with_config(workload.config.with_knobs(knobs))


# ----- inside vLLM --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_the_vllm_hasher_gives_random_requests_vllms_block_hashes(
    request: pytest.FixtureRequest, version: str
) -> None:
    """sha256 and sha256_cbor, PYTHONHASHSEED unset and set, with and without LoRA."""
    venv = _venv(request, version)
    cases = _json_lines(venv.run([str(SCRIPT), "requests", "11", "300"]).stdout)
    assert len(cases) == 6
    for result in cases:
        assert result["difference"] is None, result
        assert result["compared"] > 1000, result


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_the_engine_ends_a_workload_with_vllms_block_pool_hashes(
    request: pytest.FixtureRequest, version: str, tmp_path: Path
) -> None:
    venv = _venv(request, version)
    workloads = [*map(case, PREFIX_CACHING), _with_prefix_caching(LORA_CASE, tmp_path)]
    results = _json_lines(venv.run([str(SCRIPT), "pool", *map(str, workloads)]).stdout)
    assert len(results) == len(workloads)
    for result in results:
        assert result["block_hasher"] == "vllm-sha256"
        assert result["num_hashed"] > 0, result
        assert result["first_difference"] is None, result


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_a_vllm_trace_carries_its_hasher_and_replays_identically(
    request: pytest.FixtureRequest, version: str, tmp_path: Path
) -> None:
    venv = _venv(request, version)
    workloads = [case("04"), _with_prefix_caching(LORA_CASE, tmp_path)]
    venv.record(tmp_path, workloads, {}, env={"PYTHONHASHSEED": HASH_SEED})
    for workload in workloads:
        trace = tmp_path / f"{workload.stem}.duckdb"
        with open_trace(trace) as opened:
            assert opened.meta["prefix_caching_hash_algo"] == "sha256"
            config = recorded_config(opened)
        assert (config.block_hasher, config.none_hash) == ("vllm-sha256", VLLM_NONE_HASH)
        replayed = subprocess.run(
            [sys.executable, "-m", "stepscope", "replay", str(trace), "-o", str(trace) + ".re"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        assert replayed.stdout.startswith("identical"), replayed.stdout
        with open_trace(Path(str(trace) + ".re")) as replay:
            assert replay.config["block_hasher"] == "vllm-sha256"
            assert replay.config["none_hash"] == VLLM_NONE_HASH


# ----- the plain venv -----------------------------------------------------------


def test_an_older_trace_and_a_workload_without_the_field_use_stepscopes_hasher() -> None:
    with open_trace(REPO / "examples" / "sweep_capacity" / "vllm-bench.duckdb") as older:
        assert int(older.meta["schema_version"]) < 7
        assert older.config["block_hasher"] is None
        config = recorded_config(older)
    assert (config.block_hasher, config.none_hash) == ("stepscope", None)
    workload = load_workload(case("04"))
    assert (workload.config.block_hasher, workload.config.none_hash) == ("stepscope", None)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"block_hasher": "md5"}, "config.block_hasher: 'md5' is not one of stepscope, "),
        ({"block_hasher": "vllm-sha256"}, "config.none_hash: block_hasher vllm-sha256 needs "),
        ({"none_hash": VLLM_NONE_HASH}, "config.none_hash: only vllm-sha256 or vllm-sha256_cbor"),
        ({**VLLM_HASHER, "none_hash": "ab"}, "config.none_hash: expected 64 hex digits, got 'ab'"),
        ({"block_hasher": 1}, "config.block_hasher: expected a string, got 1"),
    ],
)
def test_a_bad_hasher_is_a_one_line_error_naming_the_field(
    tmp_path: Path, knobs: dict[str, Any], message: str
) -> None:
    raw = json.loads(case("04").read_text())
    raw["config"].update(knobs)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(WorkloadError) as error:
        load_workload(path)
    assert message in str(error.value) and "\n" not in str(error.value)
    run = subprocess.run(
        [sys.executable, "-m", "stepscope", "run", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1 and message in run.stderr


def test_a_checkpoint_hashed_as_vllm_does_restores_and_replays_identically(
    tmp_path: Path,
) -> None:
    workload = _with_knobs(case("04"), VLLM_HASHER)
    trace_path = tmp_path / "trace.duckdb"
    record(workload, trace_path, checkpoint_every=2)
    first = workload.requests[0]
    first_block = sha256((bytes.fromhex(VLLM_NONE_HASH), first.prompt_token_ids[:4], None))
    with open_trace(trace_path) as trace:
        steps = checkpoint_steps(trace)
        hashes = {h for step in steps for h in read_checkpoint(trace, step).block_pool.block_hashes}
    assert first_block in hashes
    for step in steps[1:]:
        result = replay_exact(trace_path, window=StepWindow(step))
        assert result.divergence is None and result.checkpoint_step == step


def test_a_what_if_from_a_checkpoint_cannot_change_the_hasher(tmp_path: Path) -> None:
    trace_path = tmp_path / "trace.duckdb"
    record(_with_knobs(case("04"), VLLM_HASHER), trace_path, checkpoint_every=2)
    with open_trace(trace_path) as trace:
        step = checkpoint_steps(trace)[1]
    output = tmp_path / "what-if.duckdb"
    stepscope = {"block_hasher": "stepscope", "none_hash": None}
    with pytest.raises(CheckpointError, match=r"^block_hasher: stepscope cannot start from a"):
        replay_whatif(trace_path, output, stepscope, window=StepWindow(step))
    assert not output.exists()
    whole = replay_whatif(trace_path, output, stepscope)
    assert whole.diff.classification is Classification.IDENTICAL


def test_an_xxhash_trace_replays_from_step_0_and_refuses_a_checkpoint(tmp_path: Path) -> None:
    """The engine cannot compute xxhash: it hashes as stepscope does (the same hits)."""
    trace_path = tmp_path / "trace.duckdb"
    record(_with_knobs(case("04"), {"block_hasher": "vllm-xxhash"}), trace_path, checkpoint_every=2)
    assert replay_exact(trace_path).divergence is None
    with open_trace(trace_path) as trace:
        step = checkpoint_steps(trace)[1]
    with pytest.raises(InputError, match=r"^block_hasher: vllm-xxhash hashes need the xxhash"):
        replay_exact(trace_path, window=StepWindow(step))


def test_hashers_decide_alike_and_a_diff_does_not_call_them_a_config_change(
    tmp_path: Path,
) -> None:
    ours, theirs = tmp_path / "stepscope.duckdb", tmp_path / "vllm.duckdb"
    record(case("04"), ours)
    record(_with_knobs(case("04"), VLLM_HASHER), theirs)
    diff = diff_traces(ours, theirs)
    assert diff.classification is Classification.IDENTICAL
    assert diff.config_differences == {}


def test_a_redacted_trace_keeps_no_none_hash(tmp_path: Path) -> None:
    trace_path = tmp_path / "redacted.duckdb"
    record(_with_knobs(case("04"), VLLM_HASHER), trace_path, redactor=Redactor())
    with open_trace(trace_path) as trace:
        assert (trace.config["block_hasher"], trace.config["none_hash"]) == ("stepscope", None)
    assert replay_exact(trace_path).divergence is None
