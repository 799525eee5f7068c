"""Random speculative-decoding workloads through real vLLM (the oracle) and the engine.

Both supported versions, as in `test_oracle_differential.py`. Every knob of
`random_workloads` plus k = 1..4 drafts, either method, and per-request
draft scripts (`draft_mismatch_every`, `draft_accept`). Synchronous runs compare line
for line; async ones (draft_model, as vLLM's V1 runner requires) compare each
`step_with_batch_queue` call's schedule and the state after it. Skipped where the
oracle's venv or script is missing.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, oracle_python, read_jsonl
from oracle_compare import first_difference, run_lines
from random_workloads import random_workload
from stepscope.engine import TapeModelRunner, load_workload
from stepscope.engine.arrivals import WorkloadArrivals
from stepscope.engine.core import EngineCore, make_engine_core
from stepscope.engine.engine_loop import check_prompt_len
from stepscope.engine.scheduler import Scheduler
from vllm_env import LIVE_VENV

ORACLE_SCRIPT = REPO.parent / "shared" / "oracle" / "vllm_oracle.py"
NUM_SYNC, NUM_ASYNC = 40, 30
FIRST_SEED = 10_000


def spec_workload(rng: random.Random, async_scheduling: bool) -> dict[str, Any]:
    workload = random_workload(rng, max_requests=16)
    k = rng.randint(1, 4)
    config = workload["config"]
    config["num_speculative_tokens"] = k
    if async_scheduling or rng.random() < 0.5:
        config["speculative_method"] = "draft_model"
    if async_scheduling:
        config["async_scheduling"] = True
    for request in workload["requests"]:
        draw = rng.random()
        if draw < 0.3:
            request["draft_mismatch_every"] = rng.randint(1, 5)
        elif draw < 0.6:
            request["draft_accept"] = [rng.randint(0, k) for _ in range(rng.randint(1, 6))]
    return workload


def _oracle_python(version: str) -> Path | None:
    if version == "0.32.0":
        python = LIVE_VENV / "bin" / "python"
        return python if python.exists() else None
    return oracle_python()


def _run_oracle(tmp_path: Path, version: str) -> list[Path]:
    python = _oracle_python(version)
    if python is None or not ORACLE_SCRIPT.exists():
        pytest.skip(f"no vLLM {version} venv or no ../shared/oracle script here")
    paths = []
    for offset in range(NUM_SYNC + NUM_ASYNC):
        seed = FIRST_SEED + offset
        path = tmp_path / f"w{seed}.json"
        workload = spec_workload(random.Random(seed), async_scheduling=offset >= NUM_SYNC)
        workload["config"]["vllm_version"] = version
        path.write_text(json.dumps(workload))
        paths.append(path)
    command = [str(python), str(ORACLE_SCRIPT), *map(str, paths), "--save"]
    subprocess.run(
        [*command, "--suffix", ".expected.jsonl"],
        check=True,
        capture_output=True,
        timeout=900,
        cwd=tmp_path,
    )
    return paths


def _expected(path: Path) -> list[dict[str, Any]]:
    return read_jsonl(path.with_name(path.stem + ".expected.jsonl"))


def _batch_queue_difference(path: Path) -> str | None:
    """The first `step_with_batch_queue` call whose schedule or end state is not the oracle's."""
    workload = load_workload(path)
    core = make_engine_core(workload.config, TapeModelRunner.for_workload(workload))
    arrivals = WorkloadArrivals(workload)
    aborts = workload.aborts_by_step(before_update=False)
    for line in _expected(path)[:-1]:
        for spec in arrivals.due(line["step"]):
            if check_prompt_len(len(spec.prompt_token_ids), workload.config.max_model_len) is None:
                core.add_request(core.preprocess_add_request(spec))
        for request_id in aborts.get(line["step"], ()):
            core.abort_request(request_id)
        if line.get("idle"):
            continue
        mine = _batch_queue_step(core)
        differs = sorted(key for key, value in mine.items() if line.get(key) != value)
        if differs:
            return f"step {line['step']}: " + ", ".join(
                f"{key} ours {mine[key]!r} expected {line.get(key)!r}" for key in differs
            )
    return None


def _batch_queue_step(core: EngineCore[Scheduler]) -> dict[str, Any]:
    result = core.step_with_batch_queue()
    scheduler = core.scheduler
    requests = scheduler.requests
    mine: dict[str, Any] = {
        "scheduled": result.scheduled is not None,
        "running": [r.request_id for r in scheduler.running],
        "waiting": [r.request_id for r in scheduler.waiting],
        "num_computed_tokens": {i: r.num_computed_tokens for i, r in requests.items()},
        "num_output_placeholders": {i: r.num_output_placeholders for i, r in requests.items()},
        "num_free_blocks_after_update": scheduler.get_num_free_blocks(),
    }
    if result.scheduled is not None:
        output = result.scheduled.scheduler_output
        spec = output.scheduled_spec_decode_tokens
        mine["num_scheduled_tokens"] = dict(output.num_scheduled_tokens)
        mine["scheduled_spec_decode_tokens"] = {i: list(t) for i, t in spec.items()}
        mine["num_free_blocks"] = result.scheduled.num_free_blocks_after_schedule
    return mine


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.33.0", "0.32.0"])
def test_random_spec_workloads_match_the_oracle(tmp_path: Path, version: str) -> None:
    """The engine, told the oracle's vLLM version, drafts and verifies as that version."""
    paths = _run_oracle(tmp_path, version)
    for path in paths[:NUM_SYNC]:
        difference = first_difference(run_lines(path), _expected(path))
        assert difference is None, f"{path.name}: {difference}"
    for path in paths[NUM_SYNC:]:
        difference = _batch_queue_difference(path)
        assert difference is None, f"{path.name} (async): {difference}"
